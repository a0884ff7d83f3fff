// Command go-fixture is the Go SDK's conformance fixture: the agent
// program the conformance suite starts for the Go agent (see README.md
// one folder up for its environment and handlers).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ax-scheduler/ax/agent"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "go-fixture:", err)
		os.Exit(1)
	}
}

func run() error {
	version := os.Getenv("AX_DECLARE_VERSION")
	a, err := agent.New(agent.Config{
		URL: os.Getenv("AX_SERVER"), Key: os.Getenv("AX_AGENT_KEY"), Name: os.Getenv("AX_AGENT_NAME"),
		Labels: labels(), Executors: []string{agent.KindHandler}, Capacity: envInt("AX_CAPACITY", 4),
		// The agent takes 0 for its default: 1 ns hands back at once.
		DrainGrace: max(time.Duration(envInt("AX_DRAIN_GRACE_MS", 90000))*time.Millisecond, 1),
		LeaseWait:  time.Duration(envInt("AX_LEASE_WAIT", 25)) * time.Second,
		Version:    version, Jobs: jobs(version), JobSet: os.Getenv("AX_JOB_SET"),
		Logger: slog.New(slog.NewJSONHandler(os.Stderr, nil)),
	})
	if err != nil {
		return err
	}
	a.Handle("echo", echo)
	a.Handle("sleep", sleep)
	a.Handle("fail", fail)
	a.Handle("stubborn", stubborn)
	a.Handle("print", printPieces)
	a.Handle("blob", blob)
	a.Handle("noop", func(context.Context, agent.Task) (agent.Result, error) { return nil, nil })
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	return a.Run(ctx)
}

func echo(_ context.Context, t agent.Task) (agent.Result, error) {
	fmt.Fprintf(t.Output, "echo %s\n", t.ShardParam)
	var params any
	if err := t.DecodeParams(&params); err != nil {
		return nil, err
	}
	return map[string]any{"params": params, "shard_index": t.ShardIndex, "shard_total": t.ShardTotal,
		"shard_param": t.ShardParam, "attempt": t.Attempt, "idempotency_key": t.IdempotencyKey(),
		"execution_id": t.ExecutionID, "deadline": t.Deadline.Format(time.RFC3339Nano)}, nil
}

// printPieces writes params.count pieces of params.size bytes to its log.
func printPieces(_ context.Context, t agent.Task) (agent.Result, error) {
	var p struct{ Size, Count int }
	if err := t.DecodeParams(&p); err != nil {
		return nil, err
	}
	piece := strings.Repeat("x", p.Size-1) + "\n"
	for range p.Count {
		if _, err := io.WriteString(t.Output, piece); err != nil {
			return nil, err
		}
	}
	return map[string]any{"written": p.Size * p.Count}, nil
}

// blob returns params.size bytes.
func blob(_ context.Context, t agent.Task) (agent.Result, error) {
	var p struct{ Size int }
	if err := t.DecodeParams(&p); err != nil {
		return nil, err
	}
	return map[string]any{"blob": strings.Repeat("x", p.Size)}, nil
}

func sleep(ctx context.Context, t agent.Task) (agent.Result, error) {
	var p struct{ Ms int }
	if err := t.DecodeParams(&p); err != nil {
		return nil, err
	}
	if p.Ms == 0 {
		p.Ms, _ = strconv.Atoi(t.ShardParam)
	}
	fmt.Printf("STARTED %s\n", t.TaskID)
	timer := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-timer.C:
		fmt.Printf("DONE %s\n", t.TaskID)
		return map[string]any{"slept_ms": p.Ms}, nil
	case <-ctx.Done():
		fmt.Printf("CANCELLED %s %v\n", t.TaskID, context.Cause(ctx))
		return nil, context.Cause(ctx)
	}
}

// stubborn sleeps params.ms whether or not it is told to stop.
func stubborn(_ context.Context, t agent.Task) (agent.Result, error) {
	var p struct{ Ms int }
	if err := t.DecodeParams(&p); err != nil {
		return nil, err
	}
	fmt.Printf("STARTED %s\n", t.TaskID)
	time.Sleep(time.Duration(p.Ms) * time.Millisecond)
	fmt.Printf("DONE %s\n", t.TaskID)
	return map[string]any{"slept_ms": p.Ms}, nil
}

func fail(_ context.Context, t agent.Task) (agent.Result, error) {
	var p struct{ Message, Code string }
	if err := t.DecodeParams(&p); err != nil {
		return nil, err
	}
	return nil, agent.WithErrorCode(p.Code, errors.New(p.Message))
}

func jobs(version string) []agent.JobSpec {
	if version == "" {
		return nil
	}
	group := os.Getenv("AX_JOB_GROUP")
	a := agent.JobSpec{Name: "decl-a", Group: group, Handler: "echo", Priority: 1, Timeout: 30 * time.Second}
	b := agent.JobSpec{Name: "decl-b", Group: group, Handler: "echo", Shards: 2, ShardParams: []string{"x", "y"}}
	if version == "2" {
		a.Priority = 7
		return []agent.JobSpec{a}
	}
	return []agent.JobSpec{a, b}
}

func labels() map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(os.Getenv("AX_LABELS"), ",") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = v
		}
	}
	return out
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return n
	}
	return def
}
