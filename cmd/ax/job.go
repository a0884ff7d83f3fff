package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"
)

func runJob(ctx context.Context, args []string) error {
	return subcommand(ctx, "job", args, map[string]func(context.Context, []string) error{
		"create":   jobCreate,
		"list":     jobList,
		"get":      jobByID("get"),
		"trigger":  jobTrigger,
		"pause":    jobByID("pause"),
		"resume":   jobByID("resume"),
		"delete":   jobByID("delete"),
		"why":      jobWhy,
		"backfill": jobBackfill,
	})
}

// jobWhy answers "why didn't it run at T?" (GET /v1/jobs/{id}/explain).
func jobWhy(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax job why ID --at T", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	at := fs.String("at", "", "the instant: RFC 3339 with an offset (2026-03-29T01:30:00Z), or a wall time (2026-03-29T01:30:00) in the job's timezone")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *at == "" {
		return errors.New("usage: ax job why ID --at T")
	}
	id, err := uuid.Parse(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("job id %q is not a UUID", fs.Arg(0))
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	resp, err := c.ExplainTickWithResponse(ctx, id, &client.ExplainTickParams{At: *at})
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	x := resp.JSON200
	if af.output == "json" {
		return printJSON(x)
	}
	fmt.Printf("%s (%s): %s\n%s\n", x.Local, x.At.UTC().Format(time.RFC3339), x.Verdict, x.Reason)
	return nil
}

func jobCreate(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax job create", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	file := fs.String("f", "", "job definition as JSON (- for stdin)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New("usage: ax job create -f job.json")
	}
	body, err := readInput(*file)
	if err != nil {
		return err
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	resp, err := c.CreateJobWithBodyWithResponse(ctx, "application/json", body)
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON201 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	return showJob(af.output, *resp.JSON201)
}

func jobList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax job list", flag.ContinueOnError)
	af := apiFlags{yaml: true}
	af.register(fs)
	group := fs.String("group", "", "only this group")
	owner := fs.String("owner", "", "only this owner")
	limit := fs.Int("limit", 100, "page size")
	all := fs.Bool("all", false, "follow cursors through every page")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	lim := int64(*limit)
	params := &client.ListJobsParams{Limit: &lim}
	if *group != "" {
		params.Group = group
	}
	if *owner != "" {
		params.Owner = owner
	}
	var jobs []client.Job
	var raw []json.RawMessage // as the server wrote them: params keep every digit
	for {
		resp, err := c.ListJobsWithResponse(ctx, params)
		if err != nil {
			return fmt.Errorf("error calling ax: %w", err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		if resp.JSON200.Jobs != nil {
			jobs = append(jobs, *resp.JSON200.Jobs...)
		}
		var page struct {
			Jobs []json.RawMessage `json:"jobs"`
		}
		if err := json.Unmarshal(resp.Body, &page); err != nil {
			return fmt.Errorf("error decoding jobs: %w", err)
		}
		raw = append(raw, page.Jobs...)
		next := resp.JSON200.NextCursor
		if !*all || next == nil || *next == "" {
			break
		}
		params.Cursor = next
	}
	switch af.output {
	case "json":
		return printJSON(nonNil(raw))
	case "yaml": // a list ax apply takes back
		body, err := json.Marshal(map[string]any{"jobs": nonNil(raw)})
		if err != nil {
			return err
		}
		return printYAML(body)
	}
	return showJobs(af.output, jobs...)
}

// jobByID makes the commands that take one job id.
func jobByID(verb string) func(context.Context, []string) error {
	return func(ctx context.Context, args []string) error {
		var force bool
		var flags []func(*flag.FlagSet)
		if verb == "delete" {
			flags = append(flags, func(fs *flag.FlagSet) {
				fs.BoolVar(&force, "force", false, "delete a job that a declaration set manages (its next apply creates it again)")
			})
		}
		id, af, c, err := idCommand("ax job "+verb, "job", args, flags...)
		if err != nil {
			return err
		}
		status, body, job, err := callJob(ctx, c, verb, id, force)
		if err != nil {
			return fmt.Errorf("error calling ax: %w", err)
		}
		switch {
		case verb == "delete" && status == http.StatusNoContent:
			fmt.Println("deleted", id)
			return nil
		case job == nil:
			return apiError(status, body)
		}
		return showJobBody(af.output, *job, body)
	}
}

func callJob(ctx context.Context, c *client.ClientWithResponses, verb string, id uuid.UUID, force bool) (int, []byte, *client.Job, error) {
	switch verb {
	case "get":
		r, err := c.GetJobWithResponse(ctx, id)
		if err != nil {
			return 0, nil, nil, err
		}
		return r.StatusCode(), r.Body, r.JSON200, nil
	case "pause":
		r, err := c.PauseJobWithResponse(ctx, id)
		if err != nil {
			return 0, nil, nil, err
		}
		return r.StatusCode(), r.Body, r.JSON200, nil
	case "resume":
		r, err := c.ResumeJobWithResponse(ctx, id)
		if err != nil {
			return 0, nil, nil, err
		}
		return r.StatusCode(), r.Body, r.JSON200, nil
	}
	var params *client.DeleteJobParams
	if force {
		params = &client.DeleteJobParams{Force: &force}
	}
	r, err := c.DeleteJobWithResponse(ctx, id, params)
	if err != nil {
		return 0, nil, nil, err
	}
	return r.StatusCode(), r.Body, nil, nil
}

// showJobBody shows a job; as JSON or YAML, the server's answer itself,
// so that params keep every digit and ax apply takes the output back.
func showJobBody(output string, job client.Job, body []byte) error {
	switch output {
	case "yaml":
		return printYAML(body)
	case "json":
		var buf bytes.Buffer
		if err := json.Indent(&buf, body, "", "  "); err != nil {
			return err
		}
		buf.WriteByte('\n')
		_, err := buf.WriteTo(os.Stdout)
		return err
	}
	return showJobs(output, job)
}

func showJob(output string, job client.Job) error {
	if output == "json" {
		return printJSON(job)
	}
	return showJobs(output, job)
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func showJobs(output string, jobs ...client.Job) error {
	if output == "json" {
		return printJSON(jobs)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tGROUP\tTRIGGER\tEXECUTOR\tTIMEOUT\tPAUSED\tNEXT FIRE (UTC)")
	for _, j := range jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", deref(j.Id), j.Name, deref(j.Group),
			describeTrigger(j.Trigger), j.Executor.Kind, describeTimeout(j), strconv.FormatBool(deref(j.Paused)),
			formatTime(j.NextFireAt))
	}
	if len(jobs) == 1 && jobs[0].AdaptiveTimeout != nil {
		fmt.Fprintf(w, "\nadaptive timeout: %s\n", jobs[0].AdaptiveTimeout.Explanation)
	}
	return w.Flush()
}

// describeTimeout shows a job's timeout: "60s", or "adaptive 12s (max 60s)".
func describeTimeout(j client.Job) string {
	if a := j.AdaptiveTimeout; a != nil {
		return fmt.Sprintf("adaptive %ds (max %ds)", a.TimeoutSeconds, deref(j.TimeoutSeconds))
	}
	return fmt.Sprintf("%ds", deref(j.TimeoutSeconds))
}

func describeTrigger(t client.JobTrigger) string {
	switch t.Kind {
	case client.JobTriggerKindCron:
		return fmt.Sprintf("cron %q %s", deref(t.Cron), deref(t.Timezone))
	case client.JobTriggerKindInterval:
		return fmt.Sprintf("every %ds", deref(t.IntervalSeconds))
	case client.JobTriggerKindDelay:
		return "at " + formatTime(t.RunAt)
	}
	return string(t.Kind)
}

func formatTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func readInput(path string) (io.Reader, error) {
	if path == "-" {
		return os.Stdin, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("error reading %s: %w", path, err)
	}
	return f, nil
}
