package schedule_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

type env struct {
	t    testing.TB
	pool *pgxpool.Pool
	loop *schedule.TriggerLoop
}

func setup(t testing.TB) *env {
	t.Helper()
	pool := dbtest.New(t)
	// Fire-ahead off: these tests place ticks at exact seconds and must not
	// have the next one claimed early. TestFireAhead covers it.
	return &env{t: t, pool: pool,
		loop: schedule.NewTriggerLoop(pool, nil, schedule.TriggerLoopConfig{FireAhead: -1})}
}

// job creates a job with its first fire planned as the job service plans
// it; mutate adjusts the definition first.
func (e *env) job(kind axtype.TriggerKind, mutate func(j *axtype.Job)) *axtype.Job {
	e.t.Helper()
	ctx := context.Background()
	now, err := db.Now(ctx, e.pool)
	require.NoError(e.t, err)
	return testfactory.Job(ctx, e.t, e.pool, &testfactory.JobOpts{TriggerKind: kind, Edit: func(j *axtype.Job) {
		j.RetryBackoffSeconds, j.RetryBackoffMaxSeconds = 5, 60
		switch kind {
		case axtype.TriggerCron:
			j.CronExpr = "* * * * * *"
		case axtype.TriggerInterval:
			j.IntervalSeconds = 1
		}
		if mutate != nil {
			mutate(j)
		}
		j.NextFireAt, err = schedule.NextFire(j, now)
		require.NoError(e.t, err)
	}})
}

// pause pauses a job, as the job service does.
func (e *env) pause(id uuid.UUID) (*axtype.Job, error) {
	return e.changed(id, func(tx pgx.Tx) error { return db.TriggerPause(context.Background(), tx, id) })
}

// resume resumes a job, as the job service does.
func (e *env) resume(id uuid.UUID) (*axtype.Job, error) {
	return e.changed(id, func(tx pgx.Tx) error { return schedule.Resume(context.Background(), tx, id) })
}

// update stores a job's definition whose schedule is unchanged, as the
// job service does.
func (e *env) update(job *axtype.Job) (*axtype.Job, error) {
	return e.changed(job.ID, func(tx pgx.Tx) error {
		_, err := db.JobUpdate(context.Background(), tx, job)
		return err
	})
}

// changed changes job id in a transaction, tells trigger loops and
// returns the job.
func (e *env) changed(id uuid.UUID, change func(tx pgx.Tx) error) (*axtype.Job, error) {
	ctx := context.Background()
	return db.WithTxV(ctx, e.pool, func(tx pgx.Tx) (*axtype.Job, error) {
		if err := change(tx); err != nil {
			return nil, err
		}
		if err := db.Notify(ctx, tx, notify.JobChangedChannel, id.String()); err != nil {
			return nil, err
		}
		return db.JobGetByID(ctx, tx, id)
	})
}

// behind moves a job's next fire into the past, as if no replica ran.
func (e *env) behind(id uuid.UUID, d time.Duration) time.Time {
	e.t.Helper()
	var next time.Time
	err := e.pool.QueryRow(context.Background(),
		`UPDATE ax.trigger SET next_fire_at = date_trunc('second', now()) - $2::interval
		 WHERE job_id = $1 RETURNING next_fire_at`, id, fmt.Sprintf("%d milliseconds", d.Milliseconds())).Scan(&next)
	require.NoError(e.t, err)
	return next.UTC()
}

func (e *env) fire() int {
	e.t.Helper()
	n, err := e.loop.FireDue(context.Background())
	require.NoError(e.t, err)
	return n
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func TestFireDueIntervalNoDrift(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.job(axtype.TriggerInterval, func(j *axtype.Job) { j.IntervalSeconds = 10; j.ShardCount = 3; j.ShardParams = []string{"a", "b", "c"} })
	scheduled := e.behind(j.ID, 1500*time.Millisecond)
	require.Equal(t, 1, e.fire())

	got, err := db.JobGetByID(context.Background(), e.pool, j.ID)
	require.NoError(t, err)
	require.Equal(t, scheduled.Add(10*time.Second), *got.NextFireAt, "next = previous scheduled + interval, not now + interval")
	require.Equal(t, scheduled, *got.LastScheduledFor)
	require.Equal(t, axtype.ExecutionPending, got.LastState)

	execs, err := db.ExecutionList(context.Background(), e.pool, &db.ExecutionListParams{JobID: &j.ID, Limit: 10})
	require.NoError(t, err)
	require.Len(t, execs, 1)
	require.Equal(t, axtype.CauseSchedule, execs[0].Cause)
	require.False(t, execs[0].Misfired)
	tasks, err := db.TaskListByExecution(context.Background(), e.pool, execs[0].ID)
	require.NoError(t, err)
	require.Len(t, tasks, 3)
	for i, task := range tasks {
		require.Equal(t, i, task.ShardIndex)
		require.Equal(t, 3, task.ShardTotal)
		require.Equal(t, []string{"a", "b", "c"}[i], task.ShardParam)
		require.Equal(t, axtype.TaskPending, task.State)
	}
	require.Equal(t, 0, e.fire(), "nothing else is due")
}

func TestFireDueMisfirePolicies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	once := e.job(axtype.TriggerCron, nil)
	all := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.MisfirePolicy = "fire_all"; j.MisfireMaxFires = 10 })
	skip := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.MisfirePolicy = "skip" })
	for _, j := range []*axtype.Job{once, all, skip} {
		e.behind(j.ID, 60*time.Second)
	}
	require.Equal(t, 3, e.fire())

	catchUps := func(id uuid.UUID) int {
		return e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND cause = 'catch_up' AND misfired`, id)
	}
	require.Equal(t, 1, catchUps(once.ID))
	require.Equal(t, 10, catchUps(all.ID))
	require.Equal(t, 0, catchUps(skip.ID))
	for _, j := range []*axtype.Job{once, all, skip} {
		// Every tick from 60 s ago to now is either fired or recorded as
		// skipped, once.
		fired := e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, j.ID)
		skipped := e.count(`SELECT coalesce(sum(tick_count), 0) FROM ax.skipped_fire WHERE job_id = $1 AND reason = 'misfire'`, j.ID)
		last := e.count(`SELECT extract(epoch FROM max(scheduled_for) - min(scheduled_for))::int FROM ax.all_executions WHERE job_id = $1`, j.ID)
		require.GreaterOrEqual(t, fired+skipped, 61, j.MisfirePolicy)
		require.LessOrEqual(t, last, 61)
	}
	require.Positive(t, e.count(`SELECT count(*) FROM ax.skipped_today WHERE reason = 'misfire'`))
}

func TestFireDueOverlapPolicies(t *testing.T) {
	t.Parallel()
	e := setup(t)
	// Hourly ticks, so a slow first fire never finds a second tick due.
	hourly := func(policy axtype.ConcurrencyPolicy) func(j *axtype.Job) {
		return func(j *axtype.Job) { j.IntervalSeconds = 3600; j.ConcurrencyPolicy = policy }
	}
	forbid := e.job(axtype.TriggerInterval, hourly("forbid"))
	replace := e.job(axtype.TriggerInterval, hourly("replace"))
	for _, j := range []*axtype.Job{forbid, replace} {
		e.behind(j.ID, 2*time.Second)
	}
	require.Equal(t, 2, e.fire())
	// The next tick falls due while the first execution is still pending:
	// move it into the past (after the first: a tick at or before the last
	// fired one never fires) instead of waiting for it.
	for _, j := range []*axtype.Job{forbid, replace} {
		_, err := e.pool.Exec(context.Background(), `UPDATE ax.trigger SET next_fire_at = next_fire_at - interval '3599 seconds'
			WHERE job_id = $1`, j.ID)
		require.NoError(t, err)
	}
	require.Equal(t, 2, e.fire())

	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, forbid.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.skipped_fire WHERE job_id = $1 AND reason = 'overlap'`, forbid.ID))

	require.Equal(t, 2, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, replace.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND state = 'cancelled'
		AND cancel_reason = 'replaced by a newer fire'`, replace.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_tasks WHERE job_id = $1 AND state = 'cancelled'`, replace.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND state = 'pending'`, replace.ID))
}

func TestFireDueDelayFiresOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	runAt := time.Now().Add(time.Hour)
	j := e.job(axtype.TriggerDelay, func(j *axtype.Job) { j.RunAt = &runAt })
	e.behind(j.ID, 0)
	require.Equal(t, 1, e.fire())
	got, err := db.JobGetByID(context.Background(), e.pool, j.ID)
	require.NoError(t, err)
	require.Nil(t, got.NextFireAt, "a delay job is done after it fired")
	require.Equal(t, 0, e.fire())
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, j.ID))
}

// A paused job's ticks are recorded as skipped as they pass (one record a
// pause, extended), never fired; resuming records only what passed since
// the loop last looked.
func TestPausedJobsRecordTheirTicksAsTheyPass(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := clock.New()
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})
	fireAt := func(at time.Time) int {
		t.Helper()
		c.Set(at)
		n, err := loop.FireDue(context.Background())
		require.NoError(t, err)
		return n
	}
	j := e.job(axtype.TriggerCron, nil)
	_, err := e.pause(j.ID)
	require.NoError(t, err)
	first := *j.NextFireAt
	skipped := func() []*axtype.SkippedFire {
		t.Helper()
		s, err := db.SkippedFireListByJob(context.Background(), e.pool, j.ID, 10)
		require.NoError(t, err)
		return s
	}

	require.Equal(t, 1, fireAt(first.Add(29*time.Second)), "a paused job's passed ticks are claimed, to be recorded")
	s := skipped()
	require.Len(t, s, 1)
	require.Equal(t, axtype.SkipPaused, s[0].Reason)
	require.Equal(t, first, s[0].FirstTick)
	require.Equal(t, first.Add(29*time.Second), s[0].LastTick)
	require.Equal(t, 30, s[0].TickCount)
	require.Equal(t, 0, fireAt(first.Add(29*time.Second)), "nothing more has passed")

	require.Equal(t, 1, fireAt(first.Add(39*time.Second)))
	s = skipped()
	require.Len(t, s, 1, "the pause's record grows: a row an hour, not a row a tick")
	require.Equal(t, first.Add(39*time.Second), s[0].LastTick)
	require.Equal(t, 40, s[0].TickCount)

	resumed, err := e.resume(j.ID)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.Len(t, skipped(), 1)
	require.Zero(t, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, j.ID), "paused ticks never fire")
}

// Ticks a paused job passed while no loop looked are recorded at resume
// (in the pause's record) and the schedule moves past the pause.
func TestResumeRecordsTheGap(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.job(axtype.TriggerCron, nil)
	_, err := e.pause(j.ID)
	require.NoError(t, err)
	from := e.behind(j.ID, 30*time.Second)

	resumed, err := e.resume(j.ID)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.True(t, resumed.NextFireAt.After(time.Now().Add(-2*time.Second)), "the schedule moved past the pause")
	skipped, err := db.SkippedFireListByJob(context.Background(), e.pool, j.ID, 10)
	require.NoError(t, err)
	require.Len(t, skipped, 1)
	require.Equal(t, axtype.SkipPaused, skipped[0].Reason)
	require.Equal(t, from, skipped[0].FirstTick)
	require.InDelta(t, 31, skipped[0].TickCount, 2)
	e.fire()
	require.Zero(t, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND misfired`, j.ID))
}

// TestConcurrentReplicasFireEachTickOnce races several loops over the same
// due triggers: every tick gets exactly one execution.
func TestConcurrentReplicasFireEachTickOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var ids []uuid.UUID
	for range 200 {
		j := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.MisfirePolicy = "fire_all"; j.MisfireMaxFires = 1000 })
		e.behind(j.ID, 3*time.Second)
		ids = append(ids, j.ID)
	}
	loops := make([]*schedule.TriggerLoop, 4)
	for i := range loops {
		loops[i] = schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{BatchSize: 7, FireAhead: -1})
	}
	var wg sync.WaitGroup
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := l.FireDue(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	require.Zero(t, e.count(`SELECT count(*) FROM (SELECT job_id, scheduled_for FROM ax.all_executions
		GROUP BY 1, 2 HAVING count(*) > 1) d`), "no tick fired twice")
	for _, id := range ids {
		n := e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, id)
		require.GreaterOrEqual(t, n, 4, "ticks 3 s ago to now")
		require.Equal(t, n, e.count(`SELECT count(DISTINCT scheduled_for) FROM ax.all_executions WHERE job_id = $1`, id))
		require.Equal(t, n-1, e.count(`SELECT extract(epoch FROM max(scheduled_for) - min(scheduled_for))::int
			FROM ax.all_executions WHERE job_id = $1`, id), "no gaps")
	}
}

// TestPassClaimsBesideAFullBatch: 5 jobs due at once, batches of 2. A
// loop of 1 claimer fires one batch a pass (2). Then one of 2 claimers:
// its pass's first claim comes back full and starts a second beside it,
// which takes the last one (3 in the pass, and more may be due); its next
// pass finds none. Each tick fires once.
func TestPassClaimsBesideAFullBatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	for range 5 {
		// Hourly: the default interval (1 s) makes the next ticks due
		// while the test runs.
		j := e.job(axtype.TriggerInterval, func(j *axtype.Job) { j.IntervalSeconds = 3600 })
		e.behind(j.ID, 0)
	}
	one := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{BatchSize: 2, Claimers: 1, FireAhead: -1})
	fired, full, err := one.FirePass(ctx)
	require.NoError(t, err)
	require.Equal(t, []any{2, true}, []any{fired, full}, "one claimer: one batch a pass")

	two := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{BatchSize: 2, Claimers: 2, FireAhead: -1})
	fired, full, err = two.FirePass(ctx)
	require.NoError(t, err)
	require.Equal(t, []any{3, true}, []any{fired, full}, "a full claim started one beside it: the 3 left, 2 + 1")
	fired, full, err = two.FirePass(ctx)
	require.NoError(t, err)
	require.Equal(t, []any{0, false}, []any{fired, full})
	require.Equal(t, 5, e.count(`SELECT count(*) FROM ax.all_executions`))
	require.Zero(t, e.count(`SELECT count(*) FROM (SELECT job_id, scheduled_for FROM ax.all_executions
		GROUP BY 1, 2 HAVING count(*) > 1) d`), "no tick fired twice")
}

// TestFireAhead: a tick due within the fire-ahead window fires now, and
// its tasks are held until the tick. (The tick is 5 s ahead and the
// window 10 s: with 150 ms and 250 ms, a loaded machine took longer than
// 150 ms to fire it, and it was no longer ahead.)
func TestFireAhead(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.job(axtype.TriggerInterval, func(j *axtype.Job) { j.IntervalSeconds = 60 })
	var tick time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(), `UPDATE ax.trigger SET next_fire_at = now() + interval '5 seconds'
		WHERE job_id = $1 RETURNING next_fire_at`, j.ID).Scan(&tick))
	require.Equal(t, 0, e.fire(), "not due yet without fire-ahead")

	ahead := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: 10 * time.Second})
	n, err := ahead.FireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	var notBefore, firedAt time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT t.not_before, e.fired_at FROM ax.all_tasks t
		JOIN ax.all_executions e ON e.id = t.execution_id WHERE e.job_id = $1`, j.ID).Scan(&notBefore, &firedAt))
	require.True(t, notBefore.Equal(tick), "tasks wait for the tick")
	require.True(t, firedAt.Before(tick), "the execution was committed ahead")
}

// A job whose planning fails (a cron expression that no longer parses,
// written straight into the table) and one whose task insert fails are
// set aside with their reasons; the healthy jobs of the same batch fire,
// and the set-aside ones are not claimed again until updated.
func TestFireDueSetsAsideFailingJobsAndFiresTheRest(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	// Hourly: one tick is due per fire however slow the machine is
	// between setting the ticks and firing.
	hourly := func(j *axtype.Job) { j.IntervalSeconds = 3600 }
	var healthy []uuid.UUID
	for range 5 {
		healthy = append(healthy, e.job(axtype.TriggerInterval, hourly).ID)
	}
	badCron := e.job(axtype.TriggerCron, nil)
	_, err := e.pool.Exec(ctx, `UPDATE ax.job SET cron_expr = 'not a cron' WHERE id = $1`, badCron.ID)
	require.NoError(t, err)
	badInsert := e.job(axtype.TriggerInterval, hourly)
	_, err = e.pool.Exec(ctx, `
		CREATE FUNCTION public.poison_task() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.job_id = '`+badInsert.ID.String()+`' THEN
				RAISE EXCEPTION 'injected fault' USING ERRCODE = '22003';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER poison BEFORE INSERT ON ax.task FOR EACH ROW EXECUTE FUNCTION public.poison_task()`)
	require.NoError(t, err)
	for _, id := range append([]uuid.UUID{badCron.ID, badInsert.ID}, healthy...) {
		e.behind(id, 0)
	}

	require.Equal(t, 7, e.fire())
	for _, id := range healthy {
		require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, id))
	}
	for id, want := range map[uuid.UUID]string{badCron.ID: "planning its fires failed", badInsert.ID: "injected fault"} {
		job, err := db.JobGetByID(ctx, e.pool, id)
		require.NoError(t, err)
		require.NotNil(t, job.SetAsideAt)
		require.Contains(t, job.SetAsideReason, want)
		require.Zero(t, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, id))
	}
	_, err = e.pool.Exec(ctx, `UPDATE ax.trigger SET next_fire_at = now() - interval '1 second'`)
	require.NoError(t, err)
	require.Equal(t, 5, e.fire(), "set-aside jobs are not claimed")

	// An update clears the mark.
	_, err = e.pool.Exec(ctx, `DROP TRIGGER poison ON ax.task`)
	require.NoError(t, err)
	job, err := db.JobGetByID(ctx, e.pool, badInsert.ID)
	require.NoError(t, err)
	job.Description = "fixed"
	updated, err := e.update(job)
	require.NoError(t, err)
	require.Nil(t, updated.SetAsideAt)
	require.Empty(t, updated.SetAsideReason)
	e.behind(badInsert.ID, 0)
	e.fire()
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, badInsert.ID))
}

// TestFireDueWhenTheClockReachesTheTick: a tick is not claimed before its
// time and is once the clock reaches it, scheduled for the tick itself.
func TestFireDueWhenTheClockReachesTheTick(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := clock.New()
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})
	j := e.job(axtype.TriggerInterval, func(j *axtype.Job) { j.IntervalSeconds = 60 })
	require.NotNil(t, j.NextFireAt)
	tick := *j.NextFireAt

	c.Set(tick.Add(-time.Second))
	n, err := loop.FireDue(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "a second before the tick")

	c.Set(tick)
	n, err = loop.FireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n, "at the tick")
	var scheduled time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT scheduled_for FROM ax.all_executions WHERE job_id = $1`, j.ID).Scan(&scheduled))
	require.True(t, scheduled.Equal(tick), "scheduled for the tick, not the clock")
}

// A fire routes its tasks inside its own transaction: reading the routing
// candidates there, not on a second connection of the pool, so a replica
// whose pool is down to one free connection (every other one held by a
// transaction that waits for a lock the fire holds, say) still fires. On
// a pool of one connection, taking a second one never returns.
func TestFireRoutesOnItsOwnConnection(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	router, err := dispatch.NewTaskRouter(dispatch.AgentConfig{}, dispatch.TaskRouterConfig{Refresh: time.Nanosecond}, nil, nil)
	require.NoError(t, err)
	e := &env{t: t, pool: pool,
		loop: schedule.NewTriggerLoop(pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Router: router})}
	j := e.job(axtype.TriggerCron, nil)
	e.behind(j.ID, time.Second)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := e.loop.FireDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Positive(t, e.count("SELECT count(*) FROM ax.task WHERE job_id = $1 AND preferred_agent_id IS NULL", j.ID))
}

// A stream of delayed runs due every 2 ms is fired in batches, not in a
// transaction a run: after a pass the loop waits a fifth of FireAhead
// before the next, which takes what entered the window meanwhile.
func TestAStreamOfRunsIsFiredInBatches(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	j := e.job(axtype.TriggerManual, nil)
	const runs, every, ahead = 800, 2 * time.Millisecond, time.Second // a stream of 1.6 s
	first := time.Now().Add(ahead + 500*time.Millisecond)
	stream := make([]*axtype.DelayedRun, runs)
	for i := range stream {
		stream[i] = &axtype.DelayedRun{ID: uuid.Must(uuid.NewV7()), JobID: j.ID, RunAt: first.Add(time.Duration(i) * every)}
	}
	require.NoError(t, db.DelayedRunInsertMany(ctx, e.pool, stream))

	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: ahead})
	require.NoError(t, loop.Start(ctx))
	defer loop.Stop()
	require.Eventually(t, func() bool {
		return e.count("SELECT count(*) FROM ax.execution WHERE job_id = $1", j.ID) == runs
	}, 15*time.Second, 20*time.Millisecond)
	// The runs wait in ax.execution (no agent takes them), as their firing
	// transactions wrote them: one xmin a transaction. Passes at least a
	// fifth of FireAhead apart over a 1.6 s stream make about 8, plus the
	// first (a slow machine makes fewer, larger ones). A loop that looked
	// again as soon as it had fired made 40 to 84 here, more on a faster machine
	// (one run a transaction in BenchmarkDelayedRuns).
	txs := e.count("SELECT count(DISTINCT xmin::text) FROM ax.execution WHERE job_id = $1", j.ID)
	require.LessOrEqual(t, txs, int(runs*every/(ahead/5))+3, "transactions for %d runs", runs)
	t.Logf("%d runs fired in %d transactions", runs, txs)
}

// A loop firing a stream does not ask, pass after pass, when the next fire
// is: the answer is the first live entry of delayed_run_due_idx, behind
// the dead entries of the runs just fired.
func TestAStreamIsFiredWithoutAskingForTheNextFireEachPass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	statements := &dbtest.Statements{}
	// Set up as ax's pools are: without their jit = off, compiling the
	// fire's planning statement took 1.2 s under a loaded make test.
	pool, err := db.OpenPoolWith(ctx, dbtest.NewURL(t), db.PoolOptions{Tracer: statements})
	require.NoError(t, err)
	defer pool.Close()
	e := &env{t: t, pool: pool}
	j := e.job(axtype.TriggerManual, nil)
	const runs, every, ahead = 500, 2 * time.Millisecond, 250 * time.Millisecond // a stream of 1 s
	first := time.Now().Add(time.Second)
	stream := make([]*axtype.DelayedRun, runs)
	for i := range stream {
		stream[i] = &axtype.DelayedRun{ID: uuid.Must(uuid.NewV7()), JobID: j.ID, RunAt: first.Add(time.Duration(i) * every)}
	}
	require.NoError(t, db.DelayedRunInsertMany(ctx, pool, stream))

	loop := schedule.NewTriggerLoop(pool, nil, schedule.TriggerLoopConfig{FireAhead: ahead})
	require.NoError(t, loop.Start(ctx))
	defer loop.Stop()
	require.Eventually(t, func() bool {
		return e.count("SELECT count(*) FROM ax.execution WHERE job_id = $1", j.ID) == runs
	}, 15*time.Second, 20*time.Millisecond)
	// Passes a fifth of FireAhead apart over the 1 s stream make about 20;
	// a loop that asked after each (as before) asked about 20 times.
	// Asked: before the stream, once as it ends, and a wake-up or two.
	passes, asked := statements.Count("DelayedRunClaimDue"), statements.Count("TriggerNextDue")
	require.LessOrEqual(t, asked, 6, "questions over %d passes", passes)
	t.Logf("%d passes, %d questions", passes, asked)
}

// TestFireDueWakesItsReplicasLeasePollsWhileNotificationsAreLost: behind
// a transaction pooler without a direct URL no NOTIFY arrives, and lease
// polls are woken every PollEvery; a fire wakes this replica's at once
// (Notifier.AfterCommit), so a scheduled run is leased without waiting
// for the next poll.
func TestFireDueWakesItsReplicasLeasePollsWhileNotificationsAreLost(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	n := notify.NewNotifierWith(pool, notify.NotifierConfig{NoDelivery: true, PollEvery: notify.MaxPollEvery},
		notify.TaskReadyChannel)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	e := &env{t: t, pool: pool, loop: schedule.NewTriggerLoop(pool, n, schedule.TriggerLoopConfig{FireAhead: -1})}
	j := e.job(axtype.TriggerInterval, nil)
	ready, unsubscribe := n.Subscribe(notify.TaskReadyChannel)
	defer unsubscribe()
	e.behind(j.ID, 0)
	select { // a poll's wakeup, if one came already
	case <-ready:
	default:
	}
	fired := time.Now()
	require.Equal(t, 1, e.fire())
	select {
	case <-ready:
		require.Less(t, time.Since(fired), notify.MaxPollEvery/2, "woken by the fire, not by a poll")
	case <-time.After(notify.MaxPollEvery / 2):
		t.Fatal("the fire did not wake the lease polls")
	}
}

// TestABatchWritesAtMostItsTasks: a batch writes at most MaxTasks tasks
// (here 10; jobs of 4 shards), at least one job's or run's, and leaves
// the rest, due, for the next pass: 5 jobs due at once fire 2, 2 and 1 a
// pass, and so do 5 delayed runs; each fires once. A batch of 500 runs of
// a 10,000-shard job wrote 5 million tasks in one transaction before, past
// any statement timeout, and was claimed again on every failure.
func TestABatchWritesAtMostItsTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, MaxTasks: 10})
	fourShards := func(j *axtype.Job) { j.IntervalSeconds, j.ShardCount = 3600, 4 }
	var jobs []uuid.UUID
	for range 5 {
		j := e.job(axtype.TriggerInterval, fourShards)
		e.behind(j.ID, 0)
		jobs = append(jobs, j.ID)
	}
	runs := func(sql string, args ...any) int { return e.count(sql, args...) }
	for _, want := range []int{2, 4, 5, 5} {
		_, err := loop.FireDue(ctx)
		require.NoError(t, err)
		require.Equal(t, want, runs(`SELECT count(*) FROM ax.execution WHERE job_id = ANY($1)`, jobs))
	}
	require.Equal(t, 20, runs(`SELECT count(*) FROM ax.task WHERE job_id = ANY($1)`, jobs))

	delayed := e.job(axtype.TriggerManual, func(j *axtype.Job) { j.ShardCount = 4 })
	now, err := db.Now(ctx, e.pool)
	require.NoError(t, err)
	var stream []*axtype.DelayedRun
	for i := range 5 {
		stream = append(stream, &axtype.DelayedRun{ID: uuid.Must(uuid.NewV7()), JobID: delayed.ID, RunAt: now.Add(time.Duration(i-10) * time.Millisecond)})
	}
	require.NoError(t, db.DelayedRunInsertMany(ctx, e.pool, stream))
	for _, want := range []int{2, 4, 5, 5} {
		_, err := loop.FireDueRuns(ctx)
		require.NoError(t, err)
		require.Equal(t, want, runs(`SELECT count(*) FROM ax.execution WHERE job_id = $1`, delayed.ID))
	}
	require.Zero(t, runs(`SELECT count(*) FROM ax.delayed_run WHERE job_id = $1`, delayed.ID))

	// A run of more shards than the bound fires alone, even after a run
	// held for its paused job (which makes no task).
	paused := e.job(axtype.TriggerManual, nil)
	require.NoError(t, db.TriggerPause(ctx, e.pool, paused.ID))
	big := e.job(axtype.TriggerManual, func(j *axtype.Job) { j.ShardCount = 20 })
	require.NoError(t, db.DelayedRunInsertMany(ctx, e.pool, []*axtype.DelayedRun{
		{ID: uuid.Must(uuid.NewV7()), JobID: paused.ID, RunAt: now.Add(-2 * time.Second)},
		{ID: uuid.Must(uuid.NewV7()), JobID: big.ID, RunAt: now.Add(-time.Second)}}))
	_, err = loop.FireDueRuns(ctx)
	require.NoError(t, err)
	require.Equal(t, 20, runs(`SELECT count(*) FROM ax.task WHERE job_id = $1`, big.ID))
}
