package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/testlog"
)

// newTestAgent returns an agent on d with settings that make tests fast:
// heartbeats every 20 ms, short retries, no shell self-check.
func newTestAgent(t *testing.T, d *serverDouble, cfg Config) *Agent {
	t.Helper()
	cfg.Server = d
	cfg.Key = cmp.Or(cfg.Key, "bootstrap")
	cfg.HeartbeatInterval = cmp.Or(cfg.HeartbeatInterval, 20*time.Millisecond)
	cfg.LeaseWait = cmp.Or(cfg.LeaseWait, time.Second)
	cfg.DrainGrace = cmp.Or(cfg.DrainGrace, 5*time.Second)
	cfg.KillGrace = cmp.Or(cfg.KillGrace, 200*time.Millisecond)
	if cfg.SelfCheck == nil {
		cfg.SelfCheck = func(context.Context) error { return nil }
	}
	cfg.Logger = testlog.New(t, "agent log", slog.LevelDebug)
	a, err := New(cfg)
	require.NoError(t, err)
	a.backoff = backoff{Min: time.Millisecond, Max: 20 * time.Millisecond}
	return a
}

// start runs a in the background; the returned stop drains it and returns
// Run's error. Cleanup stops it too.
func start(t *testing.T, a *Agent) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(30 * time.Second):
				t.Error("Run did not return after its context ended")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func handlerTask(id, handler string) LeasedTask {
	return LeasedTask{TaskID: id, ExecutionID: "exec-" + id, JobID: "job-1", ShardTotal: 1, Attempt: 1,
		MaxAttempts: 1, Params: json.RawMessage(`{}`), Executor: Executor{Kind: KindHandler, Handler: handler}}
}

// gate is a handler that blocks until the gate opens or its context ends.
// It counts how many tasks are inside at once and why they were stopped.
type gate struct {
	open    chan struct{}
	started chan string

	mu      sync.Mutex
	inside  int
	most    int
	stopped map[string]error
}

func newGate() *gate {
	return &gate{open: make(chan struct{}), started: make(chan string, 100), stopped: map[string]error{}}
}

func (g *gate) handle(ctx context.Context, t Task) (Result, error) {
	g.enter()
	defer g.leave()
	g.started <- t.TaskID
	select {
	case <-g.open:
		return map[string]string{"task": t.TaskID}, nil
	case <-ctx.Done():
		g.mu.Lock()
		g.stopped[t.TaskID] = context.Cause(ctx)
		g.mu.Unlock()
		return nil, ctx.Err()
	}
}

func (g *gate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inside++
	g.most = max(g.most, g.inside)
}

func (g *gate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inside--
}

func (g *gate) stoppedBy(id string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopped[id]
}

func (g *gate) counts() (inside, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inside, g.most
}

// waitStarted waits until n tasks entered the gate and returns their ids.
func (g *gate) waitStarted(t *testing.T, n int) []string {
	t.Helper()
	var ids []string
	for range n {
		select {
		case id := <-g.started:
			ids = append(ids, id)
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d tasks started", len(ids), n)
		}
	}
	return ids
}

func (d *serverDouble) resultOf(id string) (TaskResult, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, r := range d.results {
		if r.TaskID == id {
			return r, true
		}
	}
	return TaskResult{}, false
}

func (d *serverDouble) resultCount() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.results)
}

// eventually fails the test unless cond holds within 10 s.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, 5*time.Millisecond, msg)
}
