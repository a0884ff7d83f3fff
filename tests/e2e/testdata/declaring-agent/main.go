// Command declaring-agent is an agent program that declares its jobs
// next to its handlers with the SDK, for the end-to-end tests. Phase 1
// (DECLARE_PHASE=1, version 1) declares three jobs; phase 2 (version 2)
// changes tick's priority and drops cleanup.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ax-scheduler/ax/agent"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "declaring-agent:", err)
		os.Exit(1)
	}
}

func run() error {
	phase := os.Getenv("DECLARE_PHASE")
	jobs := []agent.JobSpec{
		{Name: "tick", Group: "declared", Every: time.Second, Priority: 1, Timeout: 30 * time.Second,
			Retry: &agent.RetryPolicy{MaxAttempts: 2, Backoff: time.Second, MaxBackoff: 5 * time.Second}},
		{Name: "report", Group: "declared", Cron: "0 0 3 * * ?", Timezone: "Europe/Paris", Shards: 2,
			ShardParams: []string{"eu", "us"}, Params: []byte(`{"day": "yesterday"}`)},
		{Name: "cleanup", Group: "declared", Handler: "tick", Every: time.Hour, Route: "least_active"},
	}
	if phase == "2" {
		jobs[0].Priority = 7
		jobs = jobs[:2]
	}
	logger := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	a, err := agent.New(agent.Config{
		URL: os.Getenv("AX_SERVER"), Key: os.Getenv("AX_AGENT_KEY"), Name: os.Getenv("AX_AGENT_NAME"),
		Labels: map[string]string{"pool": "declared"}, Executors: []string{agent.KindHandler},
		Version: phase, Logger: logger, Jobs: jobs, DrainGrace: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	tick := func(_ context.Context, t agent.Task) (agent.Result, error) {
		return map[string]any{"job": t.JobID, "phase": phase}, nil
	}
	a.Handle("tick", tick)
	a.Handle("report", tick)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return a.Run(ctx)
}
