package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Limits on what one result carries: the server takes errors up to 65,536
// characters, and a request of results up to 8 MiB.
const (
	maxErrorBytes  = 60 << 10
	maxResultBytes = axtype.MaxResultBytes
)

// leaseLoop asks for work while there is room for it, until ctx ends.
func (a *Agent) leaseLoop(ctx context.Context) {
	for failures, empties := 0, 0; ; {
		free, err := a.waitForRoom(ctx)
		if err != nil {
			return
		}
		began := time.Now()
		tasks, err := a.lease(ctx, free)
		if ctx.Err() != nil {
			a.handBack(tasks, "agent is draining")
			return
		}
		switch {
		case err != nil:
			a.log.ErrorContext(ctx, "error leasing tasks", "error", err)
			failures++
			err = sleep(ctx, a.backoff.delay(failures))
		case len(tasks) == 0 && time.Since(began) < a.cfg.LeaseWait/2:
			// The server answered at once with nothing, as it does for an
			// agent it does not consider active: do not spin on it.
			empties++
			err = sleep(ctx, a.backoff.delay(empties))
		default:
			failures, empties = 0, 0
			a.startAll(tasks, free)
		}
		if err != nil {
			return
		}
	}
}

// waitForRoom waits until the agent is ready, the server lets it lease,
// and fewer than Capacity tasks execute; it returns the free slots.
func (a *Agent) waitForRoom(ctx context.Context) (int, error) {
	for {
		free := a.cfg.Capacity - a.running.executingCount()
		if free > 0 && a.ready.Load() && !a.leasePaused.Load() {
			return free, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-a.wake:
		}
	}
}

// MaxLeasePerCall is the most tasks one lease call may ask for (the
// server refuses more: LeaseRequest.max in the OpenAPI spec). An agent
// with more free slots fills them over several calls.
const MaxLeasePerCall = 1000

func (a *Agent) lease(ctx context.Context, max int) ([]LeasedTask, error) {
	req := LeaseRequest{Max: min(max, MaxLeasePerCall), WaitSeconds: int(a.cfg.LeaseWait / time.Second)}
	var tasks []LeasedTask
	err := a.call(ctx, "lease", func(ctx context.Context, s Session) error {
		var err error
		tasks, err = a.server.Lease(ctx, s, req)
		return err
	})
	return tasks, err
}

// startAll starts the leased tasks. A server handing out more than asked
// would push the agent over its capacity, so the extra leases go back.
func (a *Agent) startAll(tasks []LeasedTask, free int) {
	if len(tasks) > free {
		a.log.Warn("server leased more tasks than asked; handing the extra back", "asked", free, "got", len(tasks))
		a.handBack(tasks[free:], "over capacity")
		tasks = tasks[:free]
	}
	deadline := time.Now().Add(a.leaseDuration())
	for _, t := range tasks {
		a.start(t, deadline)
	}
}

// handBack releases leases of tasks that were never started.
func (a *Agent) handBack(tasks []LeasedTask, why string) {
	refs := make([]TaskRef, len(tasks))
	for i, t := range tasks {
		refs[i] = t.Ref()
	}
	a.release(a.work, refs, why)
}

// start runs t in a goroutine of its own; deadline is when its lease ends
// unless a heartbeat renews it.
func (a *Agent) start(t LeasedTask, deadline time.Time) {
	ctx, cancel := context.WithCancelCause(a.work)
	a.running.add(t, cancel, deadline)
	a.tasks.Go(func() {
		defer cancel(nil)
		a.runTask(ctx, t)
	})
}

// runTask executes t and hands its result to the reporter, unless the lease
// was lost or handed back meanwhile.
func (a *Agent) runTask(ctx context.Context, t LeasedTask) {
	log := a.taskLogger(t)
	if t.TimeoutSeconds > 0 {
		var stop context.CancelFunc
		ctx, stop = context.WithTimeoutCause(ctx, time.Duration(t.TimeoutSeconds)*time.Second, errTimedOut)
		defer stop()
	}
	log.DebugContext(ctx, "task started", "executor", t.Executor.Kind, "attempt", t.Attempt,
		"shard_total", t.ShardTotal, "timeout_seconds", t.TimeoutSeconds)
	began := time.Now()
	result, err := a.execute(ctx, t, log)
	res := outcome(ctx, t, result, err)
	if !a.running.finish(res) {
		log.WarnContext(ctx, "task stopped and not reported", "cause", context.Cause(ctx), "duration_ms", millis(time.Since(began)))
		return
	}
	// One line per task at info, successes too: an operator reading the
	// agent's log sees each run it did (the server's line says how the
	// run as a whole ended).
	attrs := []any{"state", res.State, "attempt", t.Attempt, "duration_ms", millis(time.Since(began))}
	if res.ErrorCode != "" || res.Error != "" {
		attrs = append(attrs, "error_code", res.ErrorCode, "error", res.Error)
	}
	log.InfoContext(ctx, "task finished", attrs...)
}

// execute runs t with its executor and then waits for its output to be
// shipped: output must reach the server while the lease token is current,
// that is before the result.
func (a *Agent) execute(ctx context.Context, t LeasedTask, log *slog.Logger) (json.RawMessage, error) {
	out := newTaskOutput(t.Ref(), a.cfg.MaxOutputBytes, a.logs.enqueue)
	defer func() {
		if !out.queuedAny() { // nothing of this task to wait for
			return
		}
		flushCtx, cancel := context.WithTimeout(a.work, logSendBudget)
		defer cancel()
		a.logs.flush(flushCtx)
	}()
	e, err := a.executorFor(t.Executor.Kind)
	if err != nil {
		return nil, err
	}
	return e.execute(ctx, t, out, log)
}

// outcome is the result to report for a task that ended with result and
// err. A task that succeeded succeeded, even if a cancel came as it ended:
// its work is done.
func outcome(ctx context.Context, t LeasedTask, result json.RawMessage, err error) TaskResult {
	r := TaskResult{TaskID: t.TaskID, LeaseToken: t.LeaseToken, State: StateSucceeded, Result: result}
	cause := context.Cause(ctx)
	switch {
	case err == nil:
	case errors.Is(err, errAccepted): // the target has it: cancels and timeouts are the server's now
		r.State = StateAccepted
	case errors.Is(cause, errCancelledByServer):
		r.State, r.Error = StateCancelled, "cancelled by the server: "+err.Error()
	case errors.Is(cause, errTimedOut):
		r.State, r.Error, r.ErrorCode = StateTimedOut, fmt.Sprintf("timed out after %d s: %v", t.TimeoutSeconds, err), errorCodeTimeout
	default:
		r.State, r.Error, r.ErrorCode = StateFailed, err.Error(), errorCodeOf(err)
	}
	if len(r.Result) > maxResultBytes {
		r.State, r.Result, r.ErrorCode = StateFailed, nil, errorCodeResultTooLarge
		r.Error = fmt.Sprintf("result is %d bytes, more than the %d allowed; %s", len(result), maxResultBytes, r.Error)
	}
	r.Error = truncateText(r.Error, maxErrorBytes)
	return r
}

// truncateText cuts s to at most n bytes on a character boundary.
func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func (a *Agent) taskLogger(t LeasedTask) *slog.Logger {
	return slog.New(newLazyAttrs(a.log.Handler(), slog.String("execution_id", t.ExecutionID),
		slog.String("task_id", t.TaskID), slog.String("job_id", t.JobID), slog.Int("shard_index", t.ShardIndex)))
}

// millis is a duration for logs, in milliseconds as the server logs them.
func millis(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
