package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

func newExecCommand() *cobra.Command {
	return newGroupCommand("exec", "List, read and cancel executions (runs) and read their logs",
		newExecListCommand(), newExecByIDCommand("get", "Show a run: its tasks with agent, duration and result"),
		newExecByIDCommand("cancel", "Cancel a run"), newExecCancelKeyCommand(), newExecLogsCommand(), newExecRerunCommand())
}

// newExecCancelKeyCommand cancels scheduled (delayed) runs by the
// Idempotency-Keys they were created with.
func newExecCancelKeyCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "cancel-key KEY...", Short: "Cancel scheduled runs by the idempotency keys they were created with", Args: minArgs(1)}
	af := addAPIFlags(cmd)
	reason := cmd.Flags().String("reason", "", "recorded on the cancelled runs")
	cmd.RunE = func(cmd *cobra.Command, keys []string) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		body := client.CancelRunsByKeyJSONRequestBody{IdempotencyKeys: &keys}
		if *reason != "" {
			body.Reason = reason
		}
		resp, err := c.CancelRunsByKeyWithResponse(cmd.Context(), body)
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return render(af.output, resp.JSON200, func() error {
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "KEY\tSTATE\tID")
			for _, r := range deref(resp.JSON200.Results) {
				id := "-"
				if r.Id != nil {
					id = r.Id.String()
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", r.IdempotencyKey, r.State, id)
			}
			return w.Flush()
		})
	}
	return cmd
}

func newExecListCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "list", Short: "List executions, newest first", Args: noArgs}
	af := addAPIFlags(cmd)
	job := cmd.Flags().String("job", "", "only executions of this job (id, GROUP/NAME or NAME)")
	state := cmd.Flags().String("state", "", "only executions in this state")
	since := cmd.Flags().Duration("since", 0, "only executions scheduled within this long ago (e.g. 1h)")
	limit := cmd.Flags().Int("limit", 50, "how many")
	_ = cmd.RegisterFlagCompletionFunc("job", completeJobs(af))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions([]string{"pending", "running", "succeeded", "failed",
		"timed_out", "cancelled", "skipped"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := af.client()
		if err != nil {
			return err
		}
		lim := int64(*limit)
		params := &client.ListExecutionsParams{Limit: &lim}
		if *job != "" {
			id, err := resolveJob(cmd.Context(), c, *job)
			if err != nil {
				return err
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
		resp, err := c.ListExecutionsWithResponse(cmd.Context(), params)
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON200 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		execs := deref(resp.JSON200.Executions)
		return render(af.output, nonNil(execs), func() error {
			return showExecutions(execs, jobNames(cmd.Context(), c, execs))
		})
	}
	return cmd
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

func newExecByIDCommand(verb, short string) *cobra.Command {
	cmd := &cobra.Command{Use: verb + " ID", Short: short, Args: exactArgs(1)}
	af := addAPIFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseExecutionID(args[0])
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		var exec *client.Execution
		var status int
		var body []byte
		if verb == "get" {
			r, err := c.GetExecutionWithResponse(cmd.Context(), id, nil)
			if err != nil {
				return unreachable(err)
			}
			exec, status, body = r.JSON200, r.StatusCode(), r.Body
		} else {
			r, err := c.CancelExecutionWithResponse(cmd.Context(), id)
			if err != nil {
				return unreachable(err)
			}
			exec, status, body = r.JSON200, r.StatusCode(), r.Body
		}
		if exec == nil {
			return apiError(status, body)
		}
		return renderBody(af.output, body, func() error {
			return showExecution(*exec, jobNames(cmd.Context(), c, []client.Execution{*exec}), agentNames(cmd.Context(), c, *exec))
		})
	}
	return cmd
}

// parseExecutionID reads an execution id: runs have no names.
func parseExecutionID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, usageErrorf("execution id %q is not a UUID (`ax exec list` shows them)", s)
	}
	return id, nil
}

// agentNames reads the names of the agents that ran exec's tasks, in any
// state (GET /v1/agents by id, maxAgentIDs a call); an agent that cannot
// be read is shown by its id.
func agentNames(ctx context.Context, c *client.ClientWithResponses, exec client.Execution) map[uuid.UUID]string {
	names := map[uuid.UUID]string{}
	var ids []uuid.UUID
	for _, t := range deref(exec.Tasks) {
		if t.AgentId != nil && !slices.Contains(ids, *t.AgentId) {
			ids = append(ids, *t.AgentId)
		}
	}
	limit := int64(maxAgentIDs)
	for chunk := range slices.Chunk(ids, maxAgentIDs) {
		r, err := c.ListAgentsWithResponse(ctx, &client.ListAgentsParams{Id: &chunk, Limit: &limit})
		if err != nil || r.JSON200 == nil {
			break
		}
		for _, a := range deref(r.JSON200.Agents) {
			names[a.Id] = a.Name
		}
	}
	return names
}

// maxAgentIDs is how many ids GET /v1/agents takes at once.
const maxAgentIDs = 100

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

func showExecution(e client.Execution, names, agents map[uuid.UUID]string) error {
	if err := showExecutions([]client.Execution{e}, names); err != nil {
		return err
	}
	if e.StartedAt != nil {
		end, ongoing := time.Now(), " so far"
		if e.FinishedAt != nil {
			end, ongoing = *e.FinishedAt, ""
		}
		fmt.Printf("\nduration: %s%s\n", end.Sub(*e.StartedAt).Round(time.Millisecond), ongoing)
	}
	tasks := deref(e.Tasks)
	if len(tasks) == 0 {
		return nil
	}
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SHARD\tPARAM\tSTATE\tATTEMPT\tAGENT\tDURATION\tLOST\tCODE\tRESULT / ERROR")
	for _, t := range tasks {
		fmt.Fprintf(w, "%d/%d\t%s\t%s\t%d/%d\t%s\t%s\t%d\t%s\t%s\n", t.ShardIndex, t.ShardTotal, cmp.Or(deref(t.ShardParam), "-"), t.State,
			t.Attempt, t.MaxAttempts, agentName(t.AgentId, agents), taskDuration(t), t.LostLeases, cmp.Or(deref(t.ErrorCode), "-"),
			taskOutcome(t))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if codes := deref(e.ErrorCodes); len(codes) > 0 {
		fmt.Printf("\nerror codes: %s\n", errorCodeSummary(codes))
	}
	return nil
}

// agentName shows the agent that ran a task by name, "-" when none did.
func agentName(id *uuid.UUID, names map[uuid.UUID]string) string {
	if id == nil {
		return "-"
	}
	return cmp.Or(names[*id], id.String())
}

// taskDuration is how long a task's last attempt ran, "-" before it starts.
func taskDuration(t client.Task) string {
	if t.StartedAt == nil {
		return "-"
	}
	end := time.Now()
	if t.FinishedAt != nil {
		end = *t.FinishedAt
	}
	return end.Sub(*t.StartedAt).Round(time.Millisecond).String()
}

// maxResultWidth keeps a task's result on its row of the table; -o json
// shows it whole.
const maxResultWidth = 120

// taskOutcome is a task's error when it has one, else its result as
// compact JSON, cut to maxResultWidth.
func taskOutcome(t client.Task) string {
	text := oneLine(deref(t.Error))
	if text == "" && t.Result != nil {
		b, err := json.Marshal(t.Result)
		if err == nil {
			text = string(b)
		}
	}
	if len(text) > maxResultWidth {
		text = text[:maxResultWidth] + "…"
	}
	return cmp.Or(text, "-")
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

// newJobTriggerCommand runs a job now, or later with --at or --in.
func newJobTriggerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "trigger JOB", Short: "Run a job now (or at a time with --at, after a while with --in)",
		Long: "Run a job now, or at a time with --at, or after a while with --in.\n\n" + jobRefHelp +
			"\n\nA run scheduled for later is cancelled by its key with `ax exec cancel-key KEY`.",
		Args: exactArgs(1),
	}
	af := addAPIFlags(cmd)
	cmd.ValidArgsFunction = completeJobs(af)
	params := cmd.Flags().String("params", "", "JSON object overlaying the job's params")
	key := cmd.Flags().String("idempotency-key", "", "retry-safe key: the same key returns the same execution (and cancels a later run: ax exec cancel-key KEY)")
	at := cmd.Flags().String("at", "", "run at this instant (RFC 3339, e.g. 2026-12-24T18:00:00Z) instead of now")
	in := cmd.Flags().Duration("in", 0, "run after this long (e.g. 30m) instead of now")
	cmd.MarkFlagsMutuallyExclusive("at", "in")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		fields := map[string]any{}
		if *params != "" {
			if !json.Valid([]byte(*params)) {
				return usageErrorf("--params is not JSON: %s", *params)
			}
			fields["params"] = json.RawMessage(*params)
		}
		switch {
		case *at != "":
			t, err := time.Parse(time.RFC3339, *at)
			if err != nil {
				return usageErrorf("--at %q: want RFC 3339, e.g. 2026-12-24T18:00:00Z", *at)
			}
			fields["run_at"] = t
		case *in < 0:
			return usageErrorf("--in %s: must not be negative", *in)
		case *in > 0:
			fields["delay_seconds"] = int64(in.Round(time.Second) / time.Second)
		}
		raw, err := json.Marshal(fields)
		if err != nil {
			return err
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		id, err := resolveJob(cmd.Context(), c, args[0])
		if err != nil {
			return err
		}
		p := &client.TriggerJobParams{}
		if *key != "" {
			p.IdempotencyKey = key
		}
		resp, err := c.TriggerJobWithBodyWithResponse(cmd.Context(), id, p, "application/json", bytes.NewReader(raw))
		if err != nil {
			return unreachable(err)
		}
		if resp.JSON202 == nil {
			return apiError(resp.StatusCode(), resp.Body)
		}
		return renderBody(af.output, resp.Body, func() error {
			return showExecution(*resp.JSON202, jobNames(cmd.Context(), c, []client.Execution{*resp.JSON202}), nil)
		})
	}
	return cmd
}
