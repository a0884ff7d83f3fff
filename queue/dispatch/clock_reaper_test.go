package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
)

// A lease is not reaped before it expires and is after: the task is
// pending again with its next attempt, due after the job's backoff.
func TestReaperReapsLeaseOnlyAfterExpiry(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	task := e.trigger(2, time.Minute)
	a := e.agent("a1")
	require.Len(t, e.lease(a), 1)

	e.clock.Advance(e.cfg.Lease - 5*time.Second)
	e.sweep()
	state, attempt := e.task(task.ID)
	require.Equal(t, "leased", state, "not reaped before its lease expires")
	require.Equal(t, 1, attempt)

	e.clock.Advance(10 * time.Second)
	e.sweep()
	state, attempt = e.task(task.ID)
	require.Equal(t, "pending", state, "reaped once its lease expired")
	require.Equal(t, 2, attempt)
	e.heartbeat(a) // silent for longer than the lease, it was marked offline
	require.Equal(t, db.AgentState("active"), a.State)
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
	ref := db.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}

	e.clock.Advance(e.cfg.Lease - 5*time.Second)
	res, err := e.broker.Heartbeat(context.Background(), a.ID, []db.TaskRef{ref}, &db.AgentLoad{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ref.ID}, res.Renewed)
	e.clock.Advance(e.cfg.Lease - 5*time.Second)
	e.sweep()
	state, _ := e.task(task.ID)
	require.Equal(t, "running", state, "past the first expiry, within the renewed lease")

	e.clock.Advance(10 * time.Second)
	e.sweep()
	state, _ = e.task(task.ID)
	require.Equal(t, "failed", state, "one lease after the last heartbeat, with no attempt left")
}

// An agent silent for longer than the offline delay is marked offline by
// the next sweep; one that heartbeats is not.
func TestReaperMarksSilentAgentsOffline(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	silent, alive := e.agent("silent"), e.agent("alive")
	offlineAfter := 3 * e.broker.Config().HeartbeatInterval

	e.clock.Advance(offlineAfter - 5*time.Second)
	_, err := e.broker.Heartbeat(context.Background(), alive.ID, nil, &db.AgentLoad{})
	require.NoError(t, err)
	e.sweep()
	for _, a := range []*db.Agent{silent, alive} {
		got, err := e.broker.Get(context.Background(), a.ID)
		require.NoError(t, err)
		require.Equal(t, db.AgentState("active"), got.State, "%s: not silent long enough yet", a.Name)
	}

	e.clock.Advance(10 * time.Second)
	e.sweep()
	got, err := e.broker.Get(context.Background(), silent.ID)
	require.NoError(t, err)
	require.Equal(t, db.AgentState("offline"), got.State)
	got, err = e.broker.Get(context.Background(), alive.ID)
	require.NoError(t, err)
	require.Equal(t, db.AgentState("active"), got.State, "it heartbeated within the delay")
}
