package dispatch_test

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
)

// The reaper says why it ended an attempt in the task's error code: lost
// when the agent went silent, lease_expired when a live agent let the
// lease lapse, timeout when the task ran past its timeout (counted in
// ax_task_results_total under that code).
func TestReaperErrorCodes(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	errorCode := func(id any) any {
		var code any
		require.NoError(t, e.pool.QueryRow(ctx, "SELECT error_code FROM ax.all_tasks WHERE id = $1", id).Scan(&code))
		return code
	}
	lost := e.trigger(2, 0)
	a := e.agent("a1")
	require.Len(t, e.lease(a), 1)
	e.clock.Advance(e.cfg.Lease + time.Second)
	e.sweep()
	state, _ := e.task(lost.ID)
	require.Equal(t, "pending", state)
	require.Equal(t, axtype.ErrorCodeLost, errorCode(lost.ID))

	slow := e.trigger(1, 0)
	_, err := e.pool.Exec(ctx, "UPDATE ax.task SET timeout_seconds = 10 WHERE id = $1", slow.ID)
	require.NoError(t, err)
	e.heartbeat(a)
	leased := e.lease(a)
	require.Len(t, leased, 2, "the retry and the slow one")
	m := metrics.New(nil)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{Clock: e.clock, Metrics: m})
	e.clock.Advance(10*time.Second + dispatch.DefaultTimeoutGrace + time.Second) // past the timeout and the grace, within the lease
	require.NoError(t, reaper.Sweep(ctx))
	state, _ = e.task(slow.ID)
	require.Equal(t, "timed_out", state)
	require.Equal(t, axtype.ErrorCodeTimeout, errorCode(slow.ID))
	var counted dto.Metric
	require.NoError(t, m.TaskResults.With(string(axtype.TaskTimedOut), axtype.ErrorCodeTimeout).Write(&counted))
	require.Equal(t, float64(1), counted.GetCounter().GetValue())

	lapsed := e.trigger(2, 0)
	e.heartbeat(a)
	require.Len(t, e.lease(a), 1)
	e.clock.Advance(e.cfg.Lease + time.Second)
	e.heartbeat(a) // alive, but the lease was not renewed
	require.NoError(t, reaper.Sweep(ctx))
	state, _ = e.task(lapsed.ID)
	require.Equal(t, "pending", state)
	require.Equal(t, axtype.ErrorCodeLeaseExpired, errorCode(lapsed.ID))
}

// The database holds every writer to the error code's form, whatever the
// API checked: a result with a bad code is refused and changes nothing.
func TestDatabaseRefusesBadErrorCode(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	task := e.trigger(1, 0)
	a := e.agent("a1")
	leased := e.lease(a)
	require.Len(t, leased, 1)
	ref := axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}
	_, err := e.broker.Complete(context.Background(), a.ID,
		[]axtype.TaskResult{{TaskRef: ref, State: axtype.TaskFailed, Error: "x", ErrorCode: "Not A Code"}})
	require.ErrorContains(t, err, "task_error_code_format")
	state, _ := e.task(task.ID)
	require.Equal(t, "leased", state)

	done, err := e.broker.Complete(context.Background(), a.ID,
		[]axtype.TaskResult{{TaskRef: ref, State: axtype.TaskFailed, Error: "x", ErrorCode: "exit_3"}})
	require.NoError(t, err)
	require.Equal(t, []axtype.CompletedTask{{ID: task.ID, ExecutionID: task.ExecutionID, State: axtype.TaskFailed,
		ErrorCode: "exit_3", Finalized: true}}, done)
}

// A retry keeps its last failure's code while it waits; cancelling it ends
// it without one: the failure is not why it ended.
func TestCancelledRetryDropsItsErrorCode(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	task := e.trigger(2, time.Hour)
	a := e.agent("a1")
	leased := e.lease(a)
	require.Len(t, leased, 1)
	_, err := e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task.ID, Token: leased[0].LeaseToken},
		State: axtype.TaskFailed, Error: "exit code 3", ErrorCode: "exit_3"}})
	require.NoError(t, err)
	tasks, err := db.TaskListByExecution(ctx, e.pool, task.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, axtype.TaskPending, tasks[0].State)
	require.Equal(t, "exit_3", tasks[0].ErrorCode, "the waiting retry shows why the last attempt failed")

	_, err = e.execs.Cancel(ctx, task.ExecutionID, "no longer needed")
	require.NoError(t, err)
	tasks, err = db.TaskListByExecution(ctx, e.pool, task.ExecutionID)
	require.NoError(t, err)
	require.Equal(t, axtype.TaskCancelled, tasks[0].State)
	require.Empty(t, tasks[0].ErrorCode)
}
