package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// A task routed to one agent is another's only after the steal delay, by
// the clock; a long poll waiting for it wakes when the delay runs out
// (the next-ready time it computes follows the clock too).
func TestLeaseStealsRoutedTaskAfterTheDelay(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	task := e.trigger(1, 0)
	owner, other := e.agent("owner"), e.agent("other")
	_, err := e.pool.Exec(ctx, "UPDATE ax.task SET preferred_agent_id = $2 WHERE id = $1", task.ID, owner.ID)
	require.NoError(t, err)
	require.Empty(t, e.lease(other), "routed to another agent")

	// Set from the task's own time, not advanced from now: the clock runs
	// on in real time, and a loaded machine can spend over a second between
	// the fire and here.
	e.clock.Set(task.NotBefore.Add(e.cfg.StealAfter - 2*time.Second))
	require.Empty(t, e.lease(other), "not before the steal delay")
	if almost := task.NotBefore.Add(e.cfg.StealAfter - time.Second); e.clock.Now().Before(almost) {
		e.clock.Set(almost) // forward only
	}
	// Shorter than the IdleRecheck fallback: only the computed time
	// wakes the poll in time.
	tasks, err := e.broker.Lease(ctx, other, 10, 3*time.Second)
	require.NoError(t, err)
	require.Len(t, tasks, 1, "the waiting poll takes it when the delay runs out")
	require.Equal(t, task.ID, tasks[0].ID)
	require.False(t, tasks[0].RoutedHere)
}

// A failed attempt is retried after the job's backoff, by the clock: not
// leasable a little before it, leasable after.
func TestFailedTaskRetriedAfterBackoffByTheClock(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	task := e.trigger(2, time.Minute)
	a := e.agent("a1")
	leased := e.lease(a)
	require.Len(t, leased, 1)
	e.clock.Advance(20 * time.Second) // the attempt ran a while: the backoff counts from its end
	done, err := e.broker.Complete(context.Background(), a.ID, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: task.ID, Token: leased[0].LeaseToken}, State: "failed", Error: "exit 1"}})
	require.NoError(t, err)
	require.Len(t, done, 1)
	require.Equal(t, axtype.TaskState("pending"), done[0].State)

	e.clock.Advance(time.Minute - 5*time.Second)
	e.heartbeat(a)
	require.Empty(t, e.lease(a), "within the backoff")
	e.clock.Advance(10 * time.Second)
	e.heartbeat(a)
	retried := e.lease(a)
	require.Len(t, retried, 1, "after the backoff")
	require.Equal(t, 2, retried[0].Attempt)
}
