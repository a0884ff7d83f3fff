package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
)

// A lease is not reaped before it expires and is after: the task whose
// agent still heartbeats (it dropped the task) is pending again with its
// next attempt, due after the job's backoff.
func TestReaperReapsLeaseOnlyAfterExpiry(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	task := e.trigger(2, time.Minute)
	a := e.agent("a1")
	require.Len(t, e.lease(a), 1)

	e.clock.Advance(e.cfg.Lease - 5*time.Second)
	e.heartbeat(a) // alive, but not renewing the task
	e.sweep()
	state, attempt := e.task(task.ID)
	require.Equal(t, "leased", state, "not reaped before its lease expires")
	require.Equal(t, 1, attempt)

	e.clock.Advance(10 * time.Second)
	e.heartbeat(a)
	e.sweep()
	state, attempt = e.task(task.ID)
	require.Equal(t, "pending", state, "reaped once its lease expired")
	require.Equal(t, 2, attempt, "its agent alive, the expired lease used up an attempt")
	require.Equal(t, axtype.AgentState("active"), a.State)
	require.Empty(t, e.lease(a), "the retry waits for its backoff")
	e.clock.Advance(time.Minute)
	e.heartbeat(a)
	require.Len(t, e.lease(a), 1, "and is leased after it")
}

// A heartbeat renews a lease from the clock's now: the lease outlives its
// first expiry and runs out one lease after the last heartbeat.
func TestHeartbeatRenewsLeaseFromTheClock(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	task := e.trigger(1, 0)
	a := e.agent("a1")
	leased := e.lease(a)
	require.Len(t, leased, 1)
	ref := axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}

	e.clock.Advance(e.cfg.Lease - 5*time.Second)
	res, err := e.broker.Heartbeat(context.Background(), a.ID, []axtype.TaskRef{ref}, &axtype.AgentLoad{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ref.ID}, res.Renewed)
	e.clock.Advance(e.cfg.Lease - 5*time.Second)
	e.sweep()
	state, _ := e.task(task.ID)
	require.Equal(t, "running", state, "past the first expiry, within the renewed lease")

	e.clock.Advance(10 * time.Second)
	e.sweep()
	state, attempt := e.task(task.ID)
	require.Equal(t, "pending", state, "one lease after the last heartbeat: lost with its silent agent")
	require.Equal(t, 1, attempt, "a lost lease uses up no attempt (the job has one)")
}

// An agent silent for longer than the offline delay is marked offline by
// the next sweep; one that heartbeats is not.
func TestReaperMarksSilentAgentsOffline(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	silent, alive := e.agent("silent"), e.agent("alive")
	offlineAfter := 3 * e.broker.Config().HeartbeatInterval

	e.clock.Advance(offlineAfter - 5*time.Second)
	_, err := e.broker.Heartbeat(context.Background(), alive.ID, nil, &axtype.AgentLoad{})
	require.NoError(t, err)
	e.sweep()
	for _, a := range []*axtype.Agent{silent, alive} {
		got, err := e.broker.Get(context.Background(), a.ID)
		require.NoError(t, err)
		require.Equal(t, axtype.AgentState("active"), got.State, "%s: not silent long enough yet", a.Name)
	}

	e.clock.Advance(10 * time.Second)
	e.sweep()
	got, err := e.broker.Get(context.Background(), silent.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.AgentState("offline"), got.State)
	got, err = e.broker.Get(context.Background(), alive.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.AgentState("active"), got.State, "it heartbeated within the delay")
}

// A lease lost with its agent (silent for a whole lease, then offline)
// runs again at once, on another agent and the same attempt, until the
// reaper's MaxLostLeases-th loss fails it as lost; none of it counts as a
// retry.
func TestReaperRunsALostLeaseAgain(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	m := metrics.New(nil)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{Clock: e.clock, Metrics: m, MaxLostLeases: 2})
	task := e.trigger(2, time.Minute)
	lostLeases := func() (n int) {
		require.NoError(t, e.pool.QueryRow(context.Background(),
			"SELECT lost_leases FROM ax.all_tasks WHERE id = $1", task.ID).Scan(&n))
		return n
	}

	first := e.agent("first")
	require.Len(t, e.lease(first), 1)
	e.clock.Advance(e.cfg.Lease + time.Second) // first dies
	require.NoError(t, reaper.Sweep(context.Background()))
	state, attempt := e.task(task.ID)
	require.Equal(t, "pending", state)
	require.Equal(t, 1, attempt, "a lost lease uses up no attempt")
	require.Equal(t, 1, lostLeases())
	require.Equal(t, 1.0, counter(t, m.LostLeases))
	require.Equal(t, 1.0, counter(t, m.LeaseExpiries))
	require.Zero(t, counter(t, m.Retries), "running again after a lost lease is no retry")

	second := e.agent("second")
	leased := e.lease(second)
	require.Len(t, leased, 1, "runs again at once, no backoff")
	require.Equal(t, 1, leased[0].Attempt)
	e.clock.Advance(e.cfg.Lease + time.Second) // second dies too
	require.NoError(t, reaper.Sweep(context.Background()))
	state, attempt = e.task(task.ID)
	require.Equal(t, "failed", state, "the second lost lease reaches MaxLostLeases")
	require.Equal(t, 1, attempt, "though an attempt was left")
	require.Equal(t, 2, lostLeases())
	require.Equal(t, 2.0, counter(t, m.LostLeases))
	require.Zero(t, counter(t, m.Retries))
	var errText, execState string
	require.NoError(t, e.pool.QueryRow(context.Background(), `
		SELECT t.error, e.state::text FROM ax.all_tasks t JOIN ax.all_executions e ON e.id = t.execution_id WHERE t.id = $1`,
		task.ID).Scan(&errText, &execState))
	require.Equal(t, "lost: the lease was lost 2 times, its agent offline or silent each time", errText)
	require.Equal(t, "failed", execState)
}

// A task its agent holds past its timeout is left to that agent for
// the timeout grace: the agent stops it and reports timed_out itself, and
// that report is taken. Past the grace the reaper times it out, whatever
// the heartbeats (they keep the lease, not the task), and tells the agent
// to stop it; its run ends timed out.
func TestReaperLeavesAnOverdueTaskToItsAgentForTheGrace(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	job, err := e.jobs.Create(ctx, e.jobDef("graced", axtype.TimeoutFixed, 10, 1))
	require.NoError(t, err)
	reported, overdue := e.fire(job), e.fire(job)
	a := e.agent("a1")
	refs := map[uuid.UUID]axtype.TaskRef{}
	for _, l := range e.lease(a) {
		refs[l.ID] = axtype.TaskRef{ID: l.ID, Token: l.LeaseToken}
	}
	require.Len(t, refs, 2)
	beat := func() {
		t.Helper()
		res, err := e.broker.Heartbeat(ctx, a.ID, []axtype.TaskRef{refs[reported.ID], refs[overdue.ID]}, &axtype.AgentLoad{})
		require.NoError(t, err)
		require.Len(t, res.Renewed, 2, "both leases are renewed")
	}
	beat()

	e.clock.Advance(10*time.Second + dispatch.DefaultTimeoutGrace - time.Second)
	beat()
	e.sweep()
	for _, id := range []uuid.UUID{reported.ID, overdue.ID} {
		state, _ := e.task(id)
		require.Equal(t, "running", state, "within the grace past its 10 s timeout")
	}
	done, err := e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: refs[reported.ID], State: axtype.TaskTimedOut,
		Error: "timed out after 10 s", ErrorCode: axtype.ErrorCodeTimeout}})
	require.NoError(t, err)
	require.Len(t, done, 1, "the agent's own report is taken")
	state, _ := e.task(reported.ID)
	require.Equal(t, "timed_out", state)

	e.clock.Advance(2 * time.Second)
	e.sweep()
	state, _ = e.task(overdue.ID)
	require.Equal(t, "timed_out", state, "past the grace the reaper times it out")
	var stop bool
	var execState string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT t.cancel_requested_at IS NOT NULL, e.state::text
		FROM ax.all_tasks t JOIN ax.all_executions e ON e.id = t.execution_id WHERE t.id = $1`, overdue.ID).Scan(&stop, &execState))
	require.True(t, stop, "its agent is told to stop it")
	require.Equal(t, "timed_out", execState)
}
