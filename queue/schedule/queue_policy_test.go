package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// queueEnv drives a queue job through trigger loops on a settable clock
// and ends its runs through a lease broker, as an agent would.
type queueEnv struct {
	*env
	clock  *clock.Clock
	broker *dispatch.LeaseBroker
	agent  *axtype.Agent
	job    *axtype.Job
	tick   time.Time // the first tick
}

func setupQueue(t *testing.T) *queueEnv {
	e := setup(t)
	q := &queueEnv{env: e, clock: clock.New(),
		broker: dispatch.NewLeaseBroker(e.pool, nil, dispatch.AgentConfig{Lease: time.Minute}, nil, nil)}
	q.loop = schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: q.clock})
	q.agent = testfactory.Agent(context.Background(), t, e.pool, nil)
	// Hourly ticks: only the ticks a test moves into reach fire.
	q.job = e.job(axtype.TriggerInterval, func(j *axtype.Job) {
		j.IntervalSeconds, j.ConcurrencyPolicy = 3600, axtype.ConcurrencyQueue
	})
	q.tick = e.behind(q.job.ID, 10*time.Second)
	return q
}

// fireTick makes the tick at offset from the first due and fires it with
// loop at that instant on the clock.
func (q *queueEnv) fireTick(loop *schedule.TriggerLoop, offset time.Duration) {
	q.t.Helper()
	at := q.tick.Add(offset)
	_, err := q.pool.Exec(context.Background(), `UPDATE ax.trigger SET next_fire_at = $2 WHERE job_id = $1`, q.job.ID, at)
	require.NoError(q.t, err)
	q.clock.Set(at.Add(100 * time.Millisecond))
	n, err := loop.FireDue(context.Background())
	require.NoError(q.t, err)
	require.Equal(q.t, 1, n)
}

func (q *queueEnv) lease() []*axtype.LeasedTask {
	q.t.Helper()
	tasks, err := q.broker.Lease(context.Background(), q.agent, 10, 0)
	require.NoError(q.t, err)
	return tasks
}

func (q *queueEnv) complete(broker *dispatch.LeaseBroker, task *axtype.LeasedTask) {
	q.t.Helper()
	done, err := broker.Complete(context.Background(), q.agent.ID, []axtype.TaskResult{
		{TaskRef: axtype.TaskRef{ID: task.ID, Token: task.LeaseToken}, State: "succeeded"}})
	require.NoError(q.t, err)
	require.Len(q.t, done, 1)
}

func (q *queueEnv) run(at time.Duration) *axtype.Execution {
	q.t.Helper()
	exec, err := db.ExecutionGetByTick(context.Background(), q.pool, q.job.ID, q.tick.Add(at))
	require.NoError(q.t, err)
	return exec
}

// secondPool is another replica's connections to the same database.
func (q *queueEnv) secondPool() *pgxpool.Pool {
	q.t.Helper()
	pool, err := pgxpool.New(context.Background(), q.pool.Config().ConnString())
	require.NoError(q.t, err)
	q.t.Cleanup(pool.Close)
	return pool
}

// TestQueuePolicyRunsTheWaitingTickWhenTheLongRunEnds: a tick during a
// long run waits (an execution with its own scheduled_for, its tasks
// held) and starts in the transaction that ends the long run, on another
// replica than the one that fired it; a third tick meanwhile is skipped
// as overlap_queue_full; the other replica's loop fires and sweeps
// nothing twice.
func TestQueuePolicyRunsTheWaitingTickWhenTheLongRunEnds(t *testing.T) {
	t.Parallel()
	q := setupQueue(t)
	ctx := context.Background()

	q.fireTick(q.loop, 0)
	first := q.lease()
	require.Len(t, first, 1, "the first tick runs at once")
	long := q.run(0)

	q.fireTick(q.loop, 2*time.Second)
	waiting := q.run(2 * time.Second)
	require.Equal(t, axtype.ExecutionPending, waiting.State)
	require.Equal(t, axtype.CauseSchedule, waiting.Cause)
	wait, err := db.QueuedRunGet(ctx, q.pool, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, long.ID, wait.BehindID)
	require.Nil(t, wait.ReleasedAt)
	require.Empty(t, q.lease(), "the waiting run's task is held while the long run is unfinished")

	q.fireTick(q.loop, 4*time.Second)
	skips, err := db.SkippedFireListByJob(ctx, q.pool, q.job.ID, 10)
	require.NoError(t, err)
	require.Len(t, skips, 1)
	require.Equal(t, axtype.SkipOverlapQueueFull, skips[0].Reason)
	require.Equal(t, q.tick.Add(4*time.Second), skips[0].FirstTick)
	require.Equal(t, 2, q.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, q.job.ID))

	// The replica that fired is gone; another one, on its own
	// connections, ends the long run and fires the next tick.
	pool2 := q.secondPool()
	broker2 := dispatch.NewLeaseBroker(pool2, nil, dispatch.AgentConfig{Lease: time.Minute}, nil, nil)
	loop2 := schedule.NewTriggerLoop(pool2, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: q.clock})
	q.complete(broker2, first[0])
	// Released in the ending transaction: no loop or sweep has run.
	wait, err = db.QueuedRunGet(ctx, q.pool, waiting.ID)
	require.NoError(t, err)
	require.NotNil(t, wait.ReleasedAt)
	second := q.lease()
	require.Len(t, second, 1, "the waiting run starts right after the long run ends")
	require.Equal(t, waiting.ID, second[0].ExecutionID)

	ended, err := db.ExecutionGetByID(ctx, q.pool, long.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.ExecutionSucceeded, ended.State)
	// Runnable from the instant the long run ended (one transaction: the
	// same now()), an hour before the next tick; leased after that end.
	ready, started := q.taskTimes(second[0].ID)
	require.True(t, ready.Equal(*ended.FinishedAt), "ready %s, the long run ended %s", ready, *ended.FinishedAt)
	require.True(t, ready.Equal(*wait.ReleasedAt))
	require.False(t, started.Before(*ended.FinishedAt), "started %s, the long run ended %s", started, *ended.FinishedAt)
	require.Equal(t, q.tick.Add(2*time.Second), q.run(2*time.Second).ScheduledFor, "it keeps its own tick")

	// The new replica's loop and sweep find nothing to do twice.
	n, err := loop2.FireDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	released, err := loop2.ReleaseWaiting(ctx)
	require.NoError(t, err)
	require.Zero(t, released)
	q.complete(broker2, second[0])
	q.fireTick(loop2, 6*time.Second)
	require.Len(t, q.lease(), 1, "with nothing unfinished the next tick runs at once")
	require.Equal(t, 3, q.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, q.job.ID))
	require.Equal(t, 1, q.count(`SELECT count(*) FROM ax.queued_run WHERE job_id = $1`, q.job.ID))
}

// TestQueuePolicySweepReleasesWhatARaceLeftWaiting: when the run waited
// behind ends without the release seeing the waiting run (the two
// transactions committed at once), a loop's sweep on any replica starts
// it, once.
func TestQueuePolicySweepReleasesWhatARaceLeftWaiting(t *testing.T) {
	t.Parallel()
	q := setupQueue(t)
	ctx := context.Background()
	q.fireTick(q.loop, 0)
	first := q.lease()
	require.Len(t, first, 1)
	q.fireTick(q.loop, 2*time.Second)
	waiting := q.run(2 * time.Second)

	// The race, made certain: the end does not see the waiting run.
	conn, err := q.pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SET session_replication_role = replica`) // no triggers on this connection
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SELECT ax.history_end(ARRAY[$1::uuid], ARRAY['succeeded'], ARRAY[$2::uuid], ARRAY['succeeded'],
		ARRAY[NULL::jsonb], ARRAY[''], ARRAY[''])`, first[0].ExecutionID, first[0].ID)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `RESET session_replication_role`)
	require.NoError(t, err)
	conn.Release()
	require.Empty(t, q.lease(), "still held: the release did not run")

	loop2 := schedule.NewTriggerLoop(q.secondPool(), nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: q.clock})
	released, err := loop2.ReleaseWaiting(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, released)
	released, err = q.loop.ReleaseWaiting(ctx)
	require.NoError(t, err)
	require.Zero(t, released, "released once")
	second := q.lease()
	require.Len(t, second, 1)
	require.Equal(t, waiting.ID, second[0].ExecutionID)
}

// TestQueuePolicyCancelledWaitingRunFreesItsPlace: a waiting run that is
// cancelled no longer holds the job's one place.
func TestQueuePolicyCancelledWaitingRunFreesItsPlace(t *testing.T) {
	t.Parallel()
	q := setupQueue(t)
	ctx := context.Background()
	q.fireTick(q.loop, 0)
	require.Len(t, q.lease(), 1)
	q.fireTick(q.loop, 2*time.Second)
	_, err := db.ExecutionCancel(ctx, q.pool, []uuid.UUID{q.run(2 * time.Second).ID}, nil, "not wanted")
	require.NoError(t, err)
	q.fireTick(q.loop, 4*time.Second)
	fresh := q.run(4 * time.Second)
	wait, err := db.QueuedRunGet(ctx, q.pool, fresh.ID)
	require.NoError(t, err)
	require.Nil(t, wait.ReleasedAt, "the next tick waits in the freed place")
	require.Zero(t, q.count(`SELECT count(*) FROM ax.skipped_fire WHERE job_id = $1`, q.job.ID))
}

// taskTimes returns when a task became leasable and when it was leased.
func (q *queueEnv) taskTimes(taskID uuid.UUID) (ready, leased time.Time) {
	q.t.Helper()
	require.NoError(q.t, q.pool.QueryRow(context.Background(),
		`SELECT not_before, leased_at FROM ax.all_tasks WHERE id = $1`, taskID).Scan(&ready, &leased))
	return ready, leased
}

// TestQueuePolicyDelayedRunsWaitToo: a delayed run of a queue job that
// comes due during a run waits behind it; one more while it waits is
// cancelled as overlap_queue_full (a delayed run has no tick to skip).
func TestQueuePolicyDelayedRunsWaitToo(t *testing.T) {
	t.Parallel()
	q := setupQueue(t)
	ctx := context.Background()
	q.fireTick(q.loop, 0)
	require.Len(t, q.lease(), 1)
	delayed := func(offset time.Duration) uuid.UUID {
		id := uuid.Must(uuid.NewV7())
		require.NoError(t, db.DelayedRunInsertMany(ctx, q.pool, []*axtype.DelayedRun{
			{ID: id, JobID: q.job.ID, RunAt: q.tick.Add(offset)}}))
		q.clock.Set(q.tick.Add(offset + 100*time.Millisecond))
		n, err := q.loop.FireDueRuns(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		return id
	}
	waits := delayed(time.Second)
	wait, err := db.QueuedRunGet(ctx, q.pool, waits)
	require.NoError(t, err)
	require.Nil(t, wait.ReleasedAt)
	full := delayed(2 * time.Second)
	exec, err := db.ExecutionGetByID(ctx, q.pool, full)
	require.NoError(t, err)
	require.Equal(t, axtype.ExecutionCancelled, exec.State)
	require.Equal(t, schedule.QueueFullReason, exec.CancelReason)
	require.Empty(t, q.lease(), "the waiting delayed run is held")
}
