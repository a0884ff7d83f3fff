package main

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

func newClassCommand() *cobra.Command {
	return newGroupCommand("class", "Manage rate classes: token buckets and priority floors",
		classSet("create"), classSet("update"), newClassListCommand(),
		classByName("get", "Show a rate class"), classByName("delete", "Delete a rate class"),
		classByName("restore", "Switch an operator's priority floor off"), newClassDegradeCommand())
}

// classSet makes create and update: NAME --rate R --burst B, with an
// optional automatic floor.
func classSet(verb string) *cobra.Command {
	short := map[string]string{"create": "Create a rate class", "update": "Change a rate class"}[verb]
	cmd := &cobra.Command{Use: verb + " NAME --rate R", Short: short, Args: exactArgs(1)}
	af := addAPIFlags(cmd)
	fs := cmd.Flags()
	{
		rate := fs.Float64("rate", 0, "tasks per second, sustained")
		burst := fs.Float64("burst", 0, "bucket size: tasks that may lease at once after a quiet spell (default: rate, at least 1)")
		desc := fs.String("description", "", "what the class protects")
		autoMin := fs.String("auto-min-priority", "", "floor applied automatically under pressure (with --auto-depth or --auto-age)")
		autoDepth := fs.Int("auto-depth", 0, "degrade while more ready tasks than this wait")
		autoAge := fs.Int("auto-age", 0, "degrade while the oldest ready task has waited more than this many seconds")
		groups := fs.String("groups", "", "only jobs of these job groups may name the class, g1,g2; default: any group "+
			"(but not through keys limited to groups), or on update the class's groups as they are")
		anyGroup := false
		if verb == "update" {
			fs.BoolVar(&anyGroup, "any-group", false, "open the class to jobs of every group (drops its groups)")
		}
		cmd.RunE = func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if *rate <= 0 {
				return usageErrorf("usage: ax class %s NAME --rate R [--burst B] [--auto-min-priority P --auto-depth N | --auto-age S]", verb)
			}
			body := client.RateClass{Name: args[0], Rate: *rate, Burst: max(*burst, *rate, 1), Description: desc}
			if g := splitList(*groups); g != nil {
				body.Groups = &g
			}
			if (*autoDepth > 0 || *autoAge > 0) != (*autoMin != "") {
				return usageErrorf("--auto-min-priority goes with --auto-depth or --auto-age: the floor and when it applies")
			}
			if *autoMin != "" {
				p, err := strconv.Atoi(*autoMin)
				if err != nil {
					return usageErrorf("--auto-min-priority %q is not an integer", *autoMin)
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
					return unreachable(err)
				}
				status, raw, class = resp.StatusCode(), resp.Body, resp.JSON201
			} else {
				// An update replaces the class; its groups stay unless
				// given (or dropped on purpose): a change of rate must
				// not open a class kept to a team.
				if body.Groups == nil && !anyGroup {
					old, err := c.GetClassWithResponse(ctx, body.Name)
					if err != nil {
						return unreachable(err)
					}
					if old.JSON200 == nil {
						return apiError(old.StatusCode(), old.Body)
					}
					body.Groups = old.JSON200.Groups
				} else if body.Groups != nil && anyGroup {
					return usageErrorf("--groups and --any-group: give one")
				}
				resp, err := c.UpdateClassWithResponse(ctx, body.Name, body)
				if err != nil {
					return unreachable(err)
				}
				status, raw, class = resp.StatusCode(), resp.Body, resp.JSON200
			}
			if class == nil {
				return apiError(status, raw)
			}
			return showClasses(af.output, *class)
		}
	}
	return cmd
}

func newClassListCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List rate classes with their tokens, waiting depth and floor", Args: noArgs}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.ListClassesWithResponse(ctx)
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return showClasses(af.output, deref(resp.JSON200.Classes)...)
	}
	return cmd
}

// classDegrade switches an operator's floor on: ax class degrade NAME
// --min-priority P.
func newClassDegradeCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "degrade NAME --min-priority P", Short: "Switch an operator's priority floor on (undo with ax class restore)", Args: exactArgs(1)}
	af := addAPIFlags(cmd)
	minPriority := cmd.Flags().String("min-priority", "", "tasks below this priority wait (or skip, per job)")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		p, err := strconv.Atoi(*minPriority)
		if err != nil {
			return usageErrorf("usage: ax class degrade NAME --min-priority P (undo with ax class restore NAME)")
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.DegradeClassWithResponse(ctx, args[0], client.DegradeRequest{MinPriority: int64(p)})
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return showClasses(af.output, *resp.JSON200)
	}
	return cmd
}

// classByName makes get, delete and restore, which take one class name.
func classByName(verb, short string) *cobra.Command {
	cmd := &cobra.Command{Use: verb + " NAME", Short: short, Args: exactArgs(1)}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		c, err := af.client()
		if err != nil {
			return err
		}
		name := args[0]
		switch verb {
		case "delete":
			resp, err := c.DeleteClassWithResponse(ctx, name)
			if err != nil {
				return unreachable(err)
			}
			if resp.StatusCode() != http.StatusNoContent {
				return apiError(resp.StatusCode(), resp.Body)
			}
			fmt.Println("deleted", name)
			return nil
		case "restore":
			resp, err := c.RestoreClassWithResponse(ctx, name)
			if err != nil {
				return unreachable(err)
			}
			if resp.JSON200 == nil {
				return apiError(resp.StatusCode(), resp.Body)
			}
			return showClasses(af.output, *resp.JSON200)
		}
		resp, err := c.GetClassWithResponse(ctx, name)
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return showClasses(af.output, *resp.JSON200)
	}
	return cmd
}

func showClasses(output outputFormat, classes ...client.RateClass) error {
	var v any = nonNil(classes)
	if len(classes) == 1 {
		v = classes[0]
	}
	return render(output, v, func() error { return classTable(classes) })
}

func classTable(classes []client.RateClass) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tRATE/S\tBURST\tTOKENS\tWAITING\tOLDEST WAIT\tMIN PRIORITY\tDEGRADED\tGROUPS")
	for _, c := range classes {
		floor := "-"
		if c.EffectiveMinPriority != nil {
			floor = strconv.FormatInt(*c.EffectiveMinPriority, 10)
		}
		groups := "any"
		if c.Groups != nil {
			groups = strings.Join(*c.Groups, ",")
		}
		waiting := strconv.FormatInt(deref(c.Waiting), 10)
		if deref(c.WaitingCapped) {
			waiting = "more than " + waiting
		}
		fmt.Fprintf(w, "%s\t%g\t%g\t%.1f\t%s\t%.1fs\t%s\t%t\t%s\n", c.Name, c.Rate, c.Burst, deref(c.Tokens),
			waiting, deref(c.OldestWaitSeconds), floor, deref(c.Degraded), groups)
	}
	return w.Flush()
}
