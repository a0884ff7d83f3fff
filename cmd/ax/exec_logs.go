package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/openapi/client"
)

// newExecLogsCommand prints what an execution's tasks wrote:
//
//	ax exec logs ID [-f] [--states] [--interval 500ms] [--page-size 1000] [-o json|yaml]
//
// Each line is printed as `shard N [stream] line` (`shard N (attempt A)
// [stream] line` for a retried task's later attempts); -o json prints the
// log events themselves, one JSON object a line (-o yaml: one YAML
// document each). --states adds the tasks' state changes, in order with
// their output, as `shard N [state] leased on HOST (IP): reason`: which
// machine ran each attempt and why it ended. Events are read page by page
// with the `after` cursor. With -f the command keeps polling every
// --interval until the execution is final, prints the rest, and exits 0
// when the execution succeeded, 1 when it failed, timed out or was
// cancelled, so that scripts can wait on a run with it.
func newExecLogsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "logs ID", Short: "Print what a run's tasks wrote; -f follows until it ends",
		Long: "Print what a run's tasks wrote, as `shard N [stream] line`.\n\n" +
			"With -f, follow until the run ends: exit 0 when it succeeded, 1 when it failed, timed out or was cancelled.",
		Args: exactArgs(1),
	}
	af := addAPIFlags(cmd)
	follow := cmd.Flags().BoolP("follow", "f", false, "follow until the execution ends; exit 1 unless it succeeded")
	states := cmd.Flags().Bool("states", false, "print the tasks' state changes too, with the host that caused them")
	interval := cmd.Flags().Duration("interval", 500*time.Millisecond, "how often -f polls")
	pageSize := cmd.Flags().Int("page-size", 1000, "events per request, 1..10000")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		id, err := parseExecutionID(args[0])
		if err != nil {
			return err
		}
		if *pageSize < 1 || *pageSize > 10000 {
			return usageErrorf("--page-size %d is outside 1..10000", *pageSize)
		}
		if *interval <= 0 {
			return usageErrorf("--interval %s is not positive", *interval)
		}
		c, err := af.client()
		if err != nil {
			return err
		}
		f := &logFollower{api: c, id: id, pageSize: int64(*pageSize), states: *states,
			out: newLogPrinter(os.Stdout, af.output)}
		if !*follow {
			return f.printAll(cmd.Context())
		}
		return f.follow(cmd.Context(), *interval)
	}
	return cmd
}

// logFollower reads an execution's log events after a cursor.
type logFollower struct {
	api      *client.ClientWithResponses
	id       uuid.UUID
	pageSize int64
	states   bool  // state events too, not only output
	after    int64 // the id of the last event printed
	out      *logPrinter
}

// printAll prints every event recorded so far.
func (f *logFollower) printAll(ctx context.Context) error {
	if err := f.drain(ctx); err != nil {
		return err
	}
	return f.out.flush()
}

// follow prints events as they come until the execution is final. The
// state is read before the events: output is only recorded while a task
// holds its lease, so once the execution is final, one more read gets
// everything.
func (f *logFollower) follow(ctx context.Context, interval time.Duration) error {
	for {
		state, err := f.state(ctx)
		if err != nil {
			return err
		}
		if err := f.drain(ctx); err != nil {
			return err
		}
		if final(state) {
			if err := f.out.flush(); err != nil {
				return err
			}
			if state != client.ExecutionStateSucceeded {
				return fmt.Errorf("execution %s %s", f.id, state)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// drain prints the pages of events after the cursor until the server says
// there are no more (a page stops at a byte bound, so a short page need
// not be the last).
func (f *logFollower) drain(ctx context.Context) error {
	for {
		events, more, err := f.page(ctx)
		if err != nil {
			return err
		}
		for _, e := range events {
			if err := f.out.print(e); err != nil {
				return err
			}
			f.after = e.Id
		}
		if !more {
			return nil
		}
	}
}

func (f *logFollower) page(ctx context.Context) ([]client.TaskEvent, bool, error) {
	after, limit := f.after, f.pageSize
	params := &client.GetExecutionLogsParams{After: &after, Limit: &limit}
	if !f.states {
		kind := client.GetExecutionLogsParamsKindLog
		params.Kind = &kind
	}
	resp, err := f.api.GetExecutionLogsWithResponse(ctx, f.id, params)
	if err != nil {
		return nil, false, fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return nil, false, apiError(resp.StatusCode(), resp.Body)
	}
	return deref(resp.JSON200.Events), resp.JSON200.More, nil
}

func (f *logFollower) state(ctx context.Context) (client.ExecutionState, error) {
	resp, err := f.api.GetExecutionWithResponse(ctx, f.id, nil)
	if err != nil {
		return "", fmt.Errorf("error calling ax: %w", err)
	}
	if resp.JSON200 == nil {
		return "", apiError(resp.StatusCode(), resp.Body)
	}
	return resp.JSON200.State, nil
}

// final reports whether an execution in state has ended.
func final(state client.ExecutionState) bool {
	return state != client.ExecutionStatePending && state != client.ExecutionStateRunning
}

// logPrinter prints output line by line. A task's output arrives in
// chunks that need not end at a line break, so the unfinished end of each
// stream of each attempt waits for its next chunk, or for flush.
type logPrinter struct {
	w       io.Writer
	format  outputFormat // table: lines; json, yaml: the events
	partial map[streamKey]*partialLine
	order   []streamKey // streams in the order they first wrote
}

type streamKey struct {
	task    uuid.UUID
	attempt int64
	stream  string
}

type partialLine struct {
	prefix, text string
}

func newLogPrinter(w io.Writer, format outputFormat) *logPrinter {
	return &logPrinter{w: w, format: format, partial: map[streamKey]*partialLine{}}
}

// print writes the complete lines of one log event and keeps the rest.
func (p *logPrinter) print(e client.TaskEvent) error {
	switch p.format {
	case "json":
		return json.NewEncoder(p.w).Encode(e)
	case "yaml":
		body, err := json.Marshal(e)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(p.w, "---\n"); err != nil {
			return err
		}
		return writeYAML(p.w, body)
	}
	if e.Kind == client.TaskEventKindState {
		_, err := fmt.Fprintln(p.w, stateLine(e))
		return err
	}
	key := streamKey{task: e.TaskId, attempt: e.Attempt, stream: deref(e.Stream)}
	pl := p.partial[key]
	if pl == nil {
		pl = &partialLine{prefix: linePrefix(e)}
		p.partial[key] = pl
		p.order = append(p.order, key)
	}
	text := pl.text + deref(e.Message)
	lines := strings.Split(text, "\n")
	pl.text = lines[len(lines)-1]
	for _, line := range lines[:len(lines)-1] {
		if _, err := fmt.Fprintf(p.w, "%s %s\n", pl.prefix, line); err != nil {
			return err
		}
	}
	return nil
}

// flush writes the unfinished lines left.
func (p *logPrinter) flush() error {
	for _, key := range p.order {
		pl := p.partial[key]
		if pl.text == "" {
			continue
		}
		if _, err := fmt.Fprintf(p.w, "%s %s\n", pl.prefix, pl.text); err != nil {
			return err
		}
		pl.text = ""
	}
	return nil
}

// stateLine is `shard N [state] STATE on HOST (IP): message`, the host
// part when the event names one.
func stateLine(e client.TaskEvent) string {
	var b strings.Builder
	state := "state"
	b.WriteString(linePrefix(client.TaskEvent{ShardIndex: e.ShardIndex, Attempt: e.Attempt, Stream: &state}))
	b.WriteString(" " + deref(e.State))
	if host, ip := deref(e.WorkerHost), deref(e.WorkerIp); host != "" || ip != "" {
		b.WriteString(" on " + strings.TrimSpace(host+" "+parenthesized(ip)))
	}
	if msg := deref(e.Message); msg != "" {
		b.WriteString(": " + strings.ReplaceAll(msg, "\n", " "))
	}
	return b.String()
}

func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return "(" + s + ")"
}

// linePrefix is `shard N [stream]`, with the attempt when it is not the
// first.
func linePrefix(e client.TaskEvent) string {
	if e.Attempt > 1 {
		return fmt.Sprintf("shard %d (attempt %d) [%s]", e.ShardIndex, e.Attempt, deref(e.Stream))
	}
	return fmt.Sprintf("shard %d [%s]", e.ShardIndex, deref(e.Stream))
}
