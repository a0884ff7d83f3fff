package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

func newJobCommand() *cobra.Command {
	return newGroupCommand("job", "Create, list, read, trigger, pause, resume and delete jobs",
		newJobCreateCommand(), newJobListCommand(),
		newJobByRefCommand("get", "Show a job"),
		newJobTriggerCommand(),
		newJobByRefCommand("pause", "Stop a job from firing until resumed"),
		newJobByRefCommand("resume", "Let a paused job fire again"),
		newJobByRefCommand("delete", "Delete a job and its runs in flight"),
		newJobWhyCommand(), newJobBackfillCommand())
}

// jobRefHelp says how a job is named, for the commands that take one.
const jobRefHelp = "JOB is the job's id, GROUP/NAME, or its NAME when one group alone has a job of that name."

// newJobWhyCommand answers "why didn't it run at T?" (GET /v1/jobs/{id}/explain).
func newJobWhyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "why JOB --at T", Short: "Explain whether and why a job fired at an instant",
		Long: "Explain whether and why a job fired (or will fire) at an instant.\n\n" + jobRefHelp,
		Args: exactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.ValidArgsFunction = completeJobs(af)
	at := cmd.Flags().String("at", "", "the instant: RFC 3339 with an offset (2026-03-29T01:30:00Z), or a wall time (2026-03-29T01:30:00) in the job's timezone")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if *at == "" {
			return usageErrorf("usage: %s (--at is required)", cmd.UseLine())
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		id, err := resolveJob(cmd.Context(), c, args[0])
		if err != nil {
			return err
		}
		resp, err := c.ExplainTickWithResponse(cmd.Context(), id, &client.ExplainTickParams{At: *at})
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		x := resp.JSON200
		return render(af.output, x, func() error {
			fmt.Printf("%s (%s): %s\n%s\n", x.Local, x.At.UTC().Format(time.RFC3339), x.Verdict, x.Reason)
			return nil
		})
	}
	return cmd
}

func newJobCreateCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "create -f FILE", Short: "Create a job from a JSON definition", Args: noArgs}
	af := addAPIFlags(cmd)
	file := cmd.Flags().StringP("file", "f", "", "job definition as JSON (- for stdin)")
	_ = cmd.MarkFlagFilename("file", "json")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *file == "" {
			return usageErrorf("usage: %s (-f is required)", cmd.UseLine())
		}
		body, err := readInput(*file)
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		resp, err := c.CreateJobWithBodyWithResponse(cmd.Context(), "application/json", body)
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON201 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return renderBody(af.output, resp.Body, func() error { return showJobs(*resp.JSON201) })
	}
	return cmd
}

func newJobListCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List jobs", Args: noArgs}
	af := addAPIFlags(cmd)
	group := cmd.Flags().String("group", "", "only this group")
	name := cmd.Flags().String("name", "", "only jobs with this name")
	owner := cmd.Flags().String("owner", "", "only this owner")
	limit := cmd.Flags().Int("limit", 100, "page size")
	all := cmd.Flags().Bool("all", false, "follow cursors through every page")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		lim := int64(*limit)
		params := &client.ListJobsParams{Limit: &lim}
		if *group != "" {
			params.Group = group
		}
		if *name != "" {
			params.Name = name
		}
		if *owner != "" {
			params.Owner = owner
		}
		var jobs []client.Job
		var raw []json.RawMessage // as the server wrote them: params keep every digit
		for {
			resp, err := c.ListJobsWithResponse(cmd.Context(), params)
			if err != nil {
				return unreachable(err)
			}
			if resp.JSON200 == nil {
				return apiError(resp.StatusCode(), resp.Body)
			}
			jobs = append(jobs, deref(resp.JSON200.Jobs)...)
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
		return showJobs(jobs...)
	}
	return cmd
}

// newJobByRefCommand makes the commands that take one job.
func newJobByRefCommand(verb, short string) *cobra.Command {
	cmd := &cobra.Command{Use: verb + " JOB", Short: short, Long: short + ".\n\n" + jobRefHelp, Args: exactArgs(1)}
	af := addAPIFlags(cmd)
	cmd.ValidArgsFunction = completeJobs(af)
	var force bool
	if verb == "delete" {
		cmd.Flags().BoolVar(&force, "force", false, "delete a job that a declaration set manages (its next apply creates it again)")
	}
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		id, err := resolveJob(cmd.Context(), c, args[0])
		if err != nil {
			return err
		}
		status, body, job, err := callJob(cmd.Context(), c, verb, id, force)
		if err != nil {
			return unreachable(err)
		}
		switch {
		case verb == "delete" && status == http.StatusNoContent:
			fmt.Println("deleted", args[0])
			return nil
		case job == nil:
			return apiError(status, body)
		}
		return renderBody(af.output, body, func() error { return showJobs(*job) })
	}
	return cmd
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

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func showJobs(jobs ...client.Job) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tGROUP\tTRIGGER\tEXECUTOR\tTIMEOUT\tPAUSED\tNEXT FIRE (UTC)")
	for _, j := range jobs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", deref(j.Id), j.Name, deref(j.Group),
			describeTriggers(j), j.Executor.Kind, describeTimeout(j), strconv.FormatBool(deref(j.Paused)),
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

// describeTriggers shows a job's trigger, or its several joined by "; ".
func describeTriggers(j client.Job) string {
	if j.Triggers != nil && len(*j.Triggers) > 0 {
		parts := make([]string, len(*j.Triggers))
		for i, t := range *j.Triggers {
			parts[i] = describeTrigger(t)
		}
		return strings.Join(parts, "; ")
	}
	if j.Trigger == nil {
		return "-"
	}
	return describeTrigger(*j.Trigger)
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
