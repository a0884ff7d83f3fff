// Command example is an ax agent with a Go handler of its own. It runs the
// tasks of jobs whose executor is {"kind": "handler", "handler":
// "reports.nightly"}, besides HTTP tasks (and no shell tasks: an agent runs
// those only when Config.Executors lists agent.KindShell):
//
//	AX_SERVER=http://127.0.0.1:8080 AX_AGENT_KEY=… go run ./agent/example
package main

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/ax-scheduler/ax/agent"
)

func main() {
	agent.Handle("reports.nightly", nightlyReport)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	a, err := agent.New(agent.Config{
		URL:    cmp.Or(os.Getenv("AX_SERVER"), "http://127.0.0.1:8080"),
		Key:    os.Getenv("AX_AGENT_KEY"),
		Labels: map[string]string{"pool": "reports"},
		Logger: logger,
	})
	if err != nil {
		logger.Error("cannot start", "error", err)
		os.Exit(1)
	}
	if err := a.Run(ctx); err != nil { // returns once drained
		logger.Error("agent stopped", "error", err)
		os.Exit(1)
	}
}

// reports stands for where reports are stored. A real store would be a
// table with a unique key; what matters is that a report is stored under the
// task's idempotency key, so that a second attempt of the same task (after a
// crash or a lost lease: tasks run at least once) finds the first one's
// report instead of building and sending it again.
var reports sync.Map

func nightlyReport(ctx context.Context, t agent.Task) (agent.Result, error) {
	var p struct {
		Day string `json:"day"`
	}
	if err := t.DecodeParams(&p); err != nil {
		return nil, err
	}
	key := t.IdempotencyKey()
	if done, ok := reports.Load(key); ok {
		t.Logger.InfoContext(ctx, "report already built by an earlier attempt", "idempotency_key", key)
		return done, nil
	}
	select {
	case <-time.After(2 * time.Second): // the work
	case <-ctx.Done():
		return nil, ctx.Err() // cancelled, timed out or drained: stop now
	}
	fmt.Fprintf(t.Output, "report for %q, shard %d of %d, attempt %d\n", p.Day, t.ShardIndex+1, t.ShardTotal, t.Attempt)
	report := map[string]any{"day": p.Day, "shard": t.ShardIndex, "rows": 42, "idempotency_key": key}
	reports.Store(key, report)
	return report, nil
}
