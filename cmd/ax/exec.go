package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/openapi/client"
)

func runExec(ctx context.Context, args []string) error {
	return subcommand(ctx, "exec", args, map[string]func(context.Context, []string) error{
		"list":       execList,
		"get":        execGet,
		"cancel":     execCancel,
		"cancel-key": execCancelKey,
		"logs":       execLogs,
		"rerun":      execRerun,
	})
}

// execCancelKey cancels scheduled (delayed) runs by the Idempotency-Keys
// they were created with.
func execCancelKey(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax exec cancel-key", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	reason := fs.String("reason", "", "recorded on the cancelled runs")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("usage: ax exec cancel-key KEY... [-reason TEXT]")
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	keys := fs.Args()
	body := client.CancelRunsByKeyJSONRequestBody{IdempotencyKeys: &keys}
	if *reason != "" {
		body.Reason = reason
	}
	resp, err := c.CancelRunsByKeyWithResponse(ctx, body)
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	if af.output == "json" {
		return printJSON(resp.JSON200)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "KEY\tSTATE\tID")
	var results []client.RunCancelResult
	if resp.JSON200.Results != nil {
		results = *resp.JSON200.Results
	}
	for _, r := range results {
		id := "-"
		if r.Id != nil {
			id = r.Id.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", r.IdempotencyKey, r.State, id)
	}
	return w.Flush()
}

func execList(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax exec list", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	job := fs.String("job", "", "only executions of this job id")
	state := fs.String("state", "", "only executions in this state")
	since := fs.Duration("since", 0, "only executions scheduled within this long ago (e.g. 1h)")
	limit := fs.Int("limit", 50, "how many")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	lim := int64(*limit)
	params := &client.ListExecutionsParams{Limit: &lim}
	if *job != "" {
		id, err := uuid.Parse(*job)
		if err != nil {
			return fmt.Errorf("--job %q is not a UUID", *job)
		}
		params.JobId = &id
	}
	if *state != "" {
		s := client.ListExecutionsParamsState(*state)
		params.State = &s
	}
	if *since > 0 {
		from := time.Now().Add(-*since)
		params.From = &from
	}
	resp, err := c.ListExecutionsWithResponse(ctx, params)
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	execs := deref(resp.JSON200.Executions)
	if af.output == "json" {
		return printJSON(execs)
	}
	return showExecutions(execs, jobNames(ctx, c, execs))
}

// jobNames reads the names of the executions' jobs, one call per job (a
// page holds a few); a job that cannot be read (deleted, or outside the
// key's groups) is shown by its id.
func jobNames(ctx context.Context, c *client.ClientWithResponses, execs []client.Execution) map[uuid.UUID]string {
	names := map[uuid.UUID]string{}
	for _, e := range execs {
		if _, ok := names[e.JobId]; ok {
			continue
		}
		names[e.JobId] = e.JobId.String()
		if r, err := c.GetJobWithResponse(ctx, e.JobId); err == nil && r.JSON200 != nil {
			names[e.JobId] = r.JSON200.Name
			if g := deref(r.JSON200.Group); g != "" && g != "default" {
				names[e.JobId] = g + "/" + r.JSON200.Name
			}
		}
	}
	return names
}

func execGet(ctx context.Context, args []string) error {
	return execByID(ctx, "get", args)
}

func execCancel(ctx context.Context, args []string) error {
	return execByID(ctx, "cancel", args)
}

func execByID(ctx context.Context, verb string, args []string) error {
	id, af, c, err := idCommand("ax exec "+verb, "execution", args)
	if err != nil {
		return err
	}
	var exec *client.Execution
	var status int
	var body []byte
	if verb == "get" {
		r, err := c.GetExecutionWithResponse(ctx, id, nil)
		if err != nil {
			return fmt.Errorf("error calling ax: %w", err)
		}
		exec, status, body = r.JSON200, r.StatusCode(), r.Body
	} else {
		r, err := c.CancelExecutionWithResponse(ctx, id)
		if err != nil {
			return fmt.Errorf("error calling ax: %w", err)
		}
		exec, status, body = r.JSON200, r.StatusCode(), r.Body
	}
	if exec == nil {
		return apiError(status, body)
	}
	if af.output == "json" {
		return printJSON(exec)
	}
	return showExecution(*exec, jobNames(ctx, c, []client.Execution{*exec}))
}

// showExecutions prints execs as a table, each job by its name in names
// (by id when names has none).
func showExecutions(execs []client.Execution, names map[uuid.UUID]string) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tJOB\tCAUSE\tSTATE\tSCHEDULED FOR (UTC)\tLAG")
	for _, e := range execs {
		cause := string(e.Cause)
		if e.Misfired {
			cause += " (misfired)"
		}
		job := names[e.JobId]
		if job == "" {
			job = e.JobId.String()
		}
		lag := "-" // a delayed run that has yet to fire
		if e.FiredAt != nil {
			lag = e.FiredAt.Sub(e.ScheduledFor).Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", e.Id, job, cause, e.State,
			formatTime(&e.ScheduledFor), lag)
	}
	return w.Flush()
}

func showExecution(e client.Execution, names map[uuid.UUID]string) error {
	if err := showExecutions([]client.Execution{e}, names); err != nil {
		return err
	}
	tasks := deref(e.Tasks)
	if len(tasks) == 0 {
		return nil
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tPARAM\tSTATE\tATTEMPT\tLOST\tCODE\tERROR")
	for _, t := range tasks {
		fmt.Fprintf(w, "%d/%d\t%s\t%s\t%d/%d\t%d\t%s\t%s\n", t.ShardIndex, t.ShardTotal, deref(t.ShardParam), t.State,
			t.Attempt, t.MaxAttempts, t.LostLeases, cmp.Or(deref(t.ErrorCode), "-"), oneLine(deref(t.Error)))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if codes := deref(e.ErrorCodes); len(codes) > 0 {
		fmt.Printf("\nerror codes: %s\n", errorCodeSummary(codes))
	}
	return nil
}

// errorCodeSummary lists shards by error code, most first, then by name:
// "exit_3=2, signal_killed=1".
func errorCodeSummary(codes map[string]int64) string {
	names := slices.Collect(maps.Keys(codes))
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(codes[b], codes[a]), cmp.Compare(a, b))
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, codes[n])
	}
	return strings.Join(parts, ", ")
}

// oneLine keeps a task's error on its row: a command's stderr tail may
// span lines.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// jobTrigger runs a job now: `ax job trigger ID [-params '{"k":"v"}'] [-idempotency-key K]`.
func jobTrigger(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax job trigger", flag.ContinueOnError)
	var af apiFlags
	af.register(fs)
	params := fs.String("params", "", "JSON object overlaying the job's params")
	key := fs.String("idempotency-key", "", "retry-safe key: the same key returns the same execution (and cancels a later run: ax run cancel KEY)")
	at := fs.String("at", "", "run at this instant (RFC 3339, e.g. 2026-12-24T18:00:00Z) instead of now")
	in := fs.Duration("in", 0, "run after this long (e.g. 30m) instead of now")
	if err := parseInterspersed(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("usage: ax job trigger ID [-params JSON] [-idempotency-key KEY] [-at TIME | -in DURATION]")
	}
	id, err := uuid.Parse(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("job id %q is not a UUID", fs.Arg(0))
	}
	c, err := af.client()
	if err != nil {
		return err
	}
	fields := map[string]any{}
	if *params != "" {
		fields["params"] = json.RawMessage(*params)
	}
	switch {
	case *at != "" && *in != 0:
		return fmt.Errorf("-at and -in: give one")
	case *at != "":
		t, err := time.Parse(time.RFC3339, *at)
		if err != nil {
			return fmt.Errorf("-at %q: want RFC 3339, e.g. 2026-12-24T18:00:00Z", *at)
		}
		fields["run_at"] = t
	case *in < 0:
		return fmt.Errorf("-in %s: must not be negative", *in)
	case *in > 0:
		fields["delay_seconds"] = int64(in.Round(time.Second) / time.Second)
	}
	raw, err := json.Marshal(fields)
	if err != nil {
		return fmt.Errorf("-params: %w", err)
	}
	body := string(raw)
	p := &client.TriggerJobParams{}
	if *key != "" {
		p.IdempotencyKey = key
	}
	resp, err := c.TriggerJobWithBodyWithResponse(ctx, id, p, "application/json", strings.NewReader(body))
	if err != nil {
		return fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON202 == nil {
		return apiError(resp.StatusCode(), resp.Body)
	}
	if af.output == "json" {
		return printJSON(resp.JSON202)
	}
	return showExecution(*resp.JSON202, jobNames(ctx, c, []client.Execution{*resp.JSON202}))
}
