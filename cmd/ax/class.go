package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"

	"github.com/ax-scheduler/ax/openapi/client"
)

func runClass(ctx context.Context, args []string) error {
	return subcommand(ctx, "class", args, map[string]func(context.Context, []string) error{
		"create":  classSet("create"),
		"update":  classSet("update"),
		"list":    classList,
		"get":     classByName("get"),
		"delete":  classByName("delete"),
		"restore": classByName("restore"),
		"degrade": classDegrade,
	})
}

// classSet makes create and update: NAME --rate R --burst B, with an
// optional automatic floor.
func classSet(verb string) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		fs := flag.NewFlagSet("ax class "+verb, flag.ContinueOnError)
		var af apiFlags
		af.register(fs)
		rate := fs.Float64("rate", 0, "tasks per second, sustained")
		burst := fs.Float64("burst", 0, "bucket size: tasks that may lease at once after a quiet spell (default: rate, at least 1)")
		desc := fs.String("description", "", "what the class protects")
		autoMin := fs.String("auto-min-priority", "", "floor applied automatically under pressure (with --auto-depth or --auto-age)")
		autoDepth := fs.Int("auto-depth", 0, "degrade while more ready tasks than this wait")
		autoAge := fs.Int("auto-age", 0, "degrade while the oldest ready task has waited more than this many seconds")
		if err := parseInterspersed(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 || *rate <= 0 {
			return fmt.Errorf("usage: ax class %s NAME --rate R [--burst B] [--auto-min-priority P --auto-depth N | --auto-age S]", verb)
		}
		body := client.RateClass{Name: fs.Arg(0), Rate: *rate, Burst: max(*burst, *rate, 1), Description: desc}
		if (*autoDepth > 0 || *autoAge > 0) != (*autoMin != "") {
			return errors.New("--auto-min-priority goes with --auto-depth or --auto-age: the floor and when it applies")
		}
		if *autoMin != "" {
			p, err := strconv.Atoi(*autoMin)
			if err != nil {
				return fmt.Errorf("--auto-min-priority %q is not an integer", *autoMin)
			}
			body.AutoDegrade = &client.AutoDegrade{MinPriority: int64(p)}
			if *autoDepth > 0 {
				d := int64(*autoDepth)
				body.AutoDegrade.Depth = &d
			}
			if *autoAge > 0 {
				a := int64(*autoAge)
				body.AutoDegrade.AgeSeconds = &a
			}
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		var status int
		var raw []byte
		var class *client.RateClass
		if verb == "create" {
			resp, err := c.CreateClassWithResponse(ctx, body)
			if err != nil {
				return fmt.Errorf("error calling ax: %w", err)
			}
			status, raw, class = resp.StatusCode(), resp.Body, resp.JSON201
		} else {
			resp, err := c.UpdateClassWithResponse(ctx, body.Name, body)
			if err != nil {
				return fmt.Errorf("error calling ax: %w", err)
			}
			status, raw, class = resp.StatusCode(), resp.Body, resp.JSON200
		}
		if class == nil {
			return apiError(status, raw)
		}
		return showClasses(af.output, *class)
	}
}

func classList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax class list", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	resp, err := c.ListClassesWithResponse(ctx)
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	var classes []client.RateClass
	if resp.JSON200.Classes != nil {
		classes = *resp.JSON200.Classes
	}
	return showClasses(af.output, classes...)
}

// classDegrade switches an operator's floor on: ax class degrade NAME
// --min-priority P.
func classDegrade(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax class degrade", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	minPriority := fs.String("min-priority", "", "tasks below this priority wait (or skip, per job)")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	p, err := strconv.Atoi(*minPriority)
	if fs.NArg() != 1 || err != nil {
		return errors.New("usage: ax class degrade NAME --min-priority P (undo with ax class restore NAME)")
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	resp, err := c.DegradeClassWithResponse(ctx, fs.Arg(0), client.DegradeRequest{MinPriority: int64(p)})
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	return showClasses(af.output, *resp.JSON200)
}

// classByName makes get, delete and restore, which take one class name.
func classByName(verb string) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		fs := flag.NewFlagSet("ax class "+verb, flag.ContinueOnError)
		var af apiFlags
		af.register(fs)
		if err := parseInterspersed(fs, args); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return fmt.Errorf("usage: ax class %s NAME", verb)
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		name := fs.Arg(0)
		switch verb {
		case "delete":
			resp, err := c.DeleteClassWithResponse(ctx, name)
			if err != nil {
				return fmt.Errorf("error calling ax: %w", err)
			}
			if resp.StatusCode() != http.StatusNoContent {
				return apiError(resp.StatusCode(), resp.Body)
			}
			fmt.Println("deleted", name)
			return nil
		case "restore":
			resp, err := c.RestoreClassWithResponse(ctx, name)
			if err != nil {
				return fmt.Errorf("error calling ax: %w", err)
			}
			if resp.JSON200 == nil {
				return apiError(resp.StatusCode(), resp.Body)
			}
			return showClasses(af.output, *resp.JSON200)
		}
		resp, err := c.GetClassWithResponse(ctx, name)
		if err != nil {
			return fmt.Errorf("error calling ax: %w", err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return showClasses(af.output, *resp.JSON200)
	}
}

func showClasses(output string, classes ...client.RateClass) error {
	if output == "json" {
		if len(classes) == 1 {
			return printJSON(classes[0])
		}
		return printJSON(classes)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tRATE/S\tBURST\tTOKENS\tWAITING\tOLDEST WAIT\tMIN PRIORITY\tDEGRADED")
	for _, c := range classes {
		floor := "-"
		if c.EffectiveMinPriority != nil {
			floor = strconv.FormatInt(*c.EffectiveMinPriority, 10)
		}
		fmt.Fprintf(w, "%s\t%g\t%g\t%.1f\t%d\t%.1fs\t%s\t%t\n", c.Name, c.Rate, c.Burst, deref(c.Tokens),
			deref(c.Waiting), deref(c.OldestWaitSeconds), floor, deref(c.Degraded))
	}
	return w.Flush()
}
