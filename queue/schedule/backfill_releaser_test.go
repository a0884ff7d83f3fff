package schedule_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// londonNightly is a job at 01:30 every night in Europe/London.
func (e *env) londonNightly() *axtype.Job {
	return e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "0 30 1 * * ?"; j.Timezone = "Europe/London" })
}

// nightlyTicks are the job's ticks in [from, to) by its rules, written out
// apart from the cron code: 01:30 London time each night; on the night
// the clocks go back (01:30 happens twice) once, at the first; on the
// night they go forward (01:30 does not exist) at the gap's end, 02:00 BST.
func nightlyTicks(t *testing.T, from time.Time, days int) []time.Time {
	t.Helper()
	london, err := time.LoadLocation("Europe/London")
	require.NoError(t, err)
	var out []time.Time
	for d := range days {
		day := from.In(london).AddDate(0, 0, d)
		switch day.Format("2006-01-02") {
		case "2026-10-25":
			out = append(out, time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC)) // 01:30 BST, the first of two
		case "2026-03-29":
			out = append(out, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)) // 02:00 BST, the gap's end
		default:
			out = append(out, time.Date(day.Year(), day.Month(), day.Day(), 1, 30, 0, 0, london).UTC())
		}
	}
	return out
}

// endRuns ends the given single-shard runs as succeeded, through the
// function an agent's result goes through (ax.history_end_single).
func (e *env) endRuns(ids []uuid.UUID) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), `
		WITH x AS (SELECT t.execution_id AS id, t.id AS task_id FROM ax.task t WHERE t.execution_id = ANY($1))
		SELECT ax.history_end_single(
		    (SELECT array_agg(id) FROM x), (SELECT array_agg('succeeded'::text) FROM x),
		    (SELECT array_agg(task_id) FROM x), (SELECT array_agg('succeeded'::text) FROM x),
		    (SELECT array_agg('{}'::jsonb) FROM x), (SELECT array_agg(''::text) FROM x),
		    (SELECT array_agg(''::text) FROM x))`, ids)
	require.NoError(e.t, err)
}

// backfillRuns lists the unfinished and all runs a backfill made.
func (e *env) backfillRuns(id uuid.UUID) (unfinished []uuid.UUID, all []time.Time) {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `
		SELECT r.execution_id, r.tick, e.finished_at IS NULL
		FROM ax.backfill_run r JOIN ax.all_executions e ON e.id = r.execution_id
		WHERE r.backfill_id = $1 ORDER BY r.tick`, id)
	require.NoError(e.t, err)
	defer rows.Close()
	for rows.Next() {
		var execID uuid.UUID
		var tick time.Time
		var open bool
		require.NoError(e.t, rows.Scan(&execID, &tick, &open))
		if open {
			unfinished = append(unfinished, execID)
		}
		all = append(all, tick.UTC())
	}
	require.NoError(e.t, rows.Err())
	return unfinished, all
}

// TestBackfillOverFallBackMakesTheJobsTicks: 30 nights of 0 30 1 * * ? in
// Europe/London over the October change get exactly the job's ticks (the
// night of the change once), skipping the ticks that ran already, at most
// max_concurrent at a time, in tick order; a second identical backfill
// adds nothing.
func TestBackfillOverFallBackMakesTheJobsTicks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	job := e.londonNightly()
	from := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 0, 30)
	want := nightlyTicks(t, from, 30)
	require.Len(t, want, 30)

	// Two ticks ran on schedule already (one of them on the night of the
	// change, and ended), and one was fired by hand (not a tick's run).
	ran := []time.Time{want[2], want[15]}
	var ranIDs []uuid.UUID
	for _, tick := range ran {
		id := uuid.Must(uuid.NewV7())
		ranIDs = append(ranIDs, id)
		_, err := dispatch.InsertExecutions(ctx, e.pool, nil, nil, []*axtype.NewExecution{{ID: id, JobID: job.ID,
			Cause: axtype.CauseSchedule, ScheduledFor: tick}}, nil)
		require.NoError(t, err)
	}
	e.endRuns(ranIDs[1:])
	_, err := dispatch.InsertExecutions(ctx, e.pool, nil, nil, []*axtype.NewExecution{{ID: uuid.Must(uuid.NewV7()),
		JobID: job.ID, Cause: axtype.CauseManual, ScheduledFor: want[4]}}, nil)
	require.NoError(t, err)

	backfills := queue.NewBackfillService(e.pool, nil, nil)
	b, err := backfills.Create(ctx, &queue.BackfillRequest{JobID: job.ID, From: from, To: to, MaxConcurrent: 3})
	require.NoError(t, err)
	require.Equal(t, 30, b.TicksTotal)
	require.Equal(t, want[0], b.NextTick)

	releaser := schedule.NewBackfillReleaser(e.pool, nil, schedule.BackfillReleaserConfig{})
	var released []time.Time
	for pass := 0; ; pass++ {
		require.Less(t, pass, 100, "the backfill never finished")
		n, err := releaser.ReleaseDue(ctx)
		require.NoError(t, err)
		unfinished, all := e.backfillRuns(b.ID)
		require.LessOrEqual(t, len(unfinished), 3, "max_concurrent")
		if n > 0 {
			require.Len(t, unfinished, min(3, 28-len(released)), "released up to max_concurrent at once while ticks remain")
		}
		// Released in tick order: what is released now follows what was.
		require.True(t, slices.Equal(released, all[:len(released)]), "released %v, then %v", released, all)
		released = all
		// Another pass while they run releases nothing more.
		more, err := releaser.ReleaseDue(ctx)
		require.NoError(t, err)
		require.Zero(t, more)
		if len(unfinished) == 0 {
			break
		}
		e.endRuns(unfinished)
	}
	var expected []time.Time
	for _, tick := range want {
		if !tick.Equal(ran[0]) && !tick.Equal(ran[1]) {
			expected = append(expected, tick)
		}
	}
	require.Equal(t, expected, released, "exactly the job's ticks that had not run")

	got, err := backfills.Get(ctx, b.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.BackfillFinished, got.State)
	require.Equal(t, 28, got.TicksCreated)
	require.Equal(t, 2, got.TicksExisting)
	require.Equal(t, 28, got.RunsSucceeded)
	require.Zero(t, got.RunsUnfinished)
	// Each tick has exactly one scheduled or backfilled run.
	require.Equal(t, 30, e.count(`SELECT count(DISTINCT scheduled_for) FROM ax.all_executions
		WHERE job_id = $1 AND cause IN ('schedule', 'backfill')`, job.ID))
	require.Equal(t, 30, e.count(`SELECT count(*) FROM ax.all_executions
		WHERE job_id = $1 AND cause IN ('schedule', 'backfill')`, job.ID))

	// A second identical backfill adds nothing.
	again, err := backfills.Create(ctx, &queue.BackfillRequest{JobID: job.ID, From: from, To: to, MaxConcurrent: 3})
	require.NoError(t, err)
	for range 3 {
		n, err := releaser.ReleaseDue(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	}
	got, err = backfills.Get(ctx, again.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.BackfillFinished, got.State)
	require.Zero(t, got.TicksCreated)
	require.Equal(t, 30, got.TicksExisting)

}

// TestBackfillOverSpringForwardFiresAtTheGapsEnd: the night 01:30 does not
// exist in London gets its tick at the gap's end; a backfill with a
// retried request key is made once; the schedule's fire of a backfilled
// tick is left out (execution_tick_once_idx).
func TestBackfillOverSpringForwardFiresAtTheGapsEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	job := e.londonNightly()
	from := time.Date(2026, 3, 15, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 0, 30)
	backfills := queue.NewBackfillService(e.pool, nil, nil)
	req := &queue.BackfillRequest{JobID: job.ID, From: from, To: to, MaxConcurrent: 30, RequestKey: "spring"}
	b, err := backfills.Create(ctx, req)
	require.NoError(t, err)
	retry, err := backfills.Create(ctx, req)
	require.NoError(t, err)
	require.Equal(t, b.ID, retry.ID, "a retried create is the same backfill")

	releaser := schedule.NewBackfillReleaser(e.pool, nil, schedule.BackfillReleaserConfig{})
	n, err := releaser.ReleaseDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 30, n)
	_, all := e.backfillRuns(b.ID)
	require.Equal(t, nightlyTicks(t, from, 30), all)
	require.Contains(t, all, time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC))

	inserted, err := dispatch.InsertExecutions(ctx, e.pool, nil, nil, []*axtype.NewExecution{{ID: uuid.Must(uuid.NewV7()),
		JobID: job.ID, Cause: axtype.CauseSchedule, ScheduledFor: all[14]}}, nil)
	require.NoError(t, err)
	require.Empty(t, inserted, "the tick has its backfilled run")
}

// TestBackfillsAtTheirLimitHoldNoneBack: the releaser holds two backfills
// a pass (BatchSize 2). Two older backfills stay at their max_concurrent
// (their runs do not end); a third, made after them, is served on the
// next pass. Each pass took the two oldest running backfills before, and
// the third was never served while their runs lasted.
func TestBackfillsAtTheirLimitHoldNoneBack(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	from := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 0, 10)
	backfills := queue.NewBackfillService(e.pool, nil, nil)
	var ids []uuid.UUID
	for range 3 {
		b, err := backfills.Create(ctx, &queue.BackfillRequest{JobID: e.londonNightly().ID, From: from, To: to, MaxConcurrent: 1})
		require.NoError(t, err)
		ids = append(ids, b.ID)
	}
	releaser := schedule.NewBackfillReleaser(e.pool, nil, schedule.BackfillReleaserConfig{BatchSize: 2})
	n, err := releaser.ReleaseDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the two oldest, one run each")
	for range 3 {
		n, err = releaser.ReleaseDue(ctx)
		require.NoError(t, err)
		if n > 0 {
			break
		}
	}
	require.Equal(t, 1, n, "the third backfill's first run")
	for i, id := range ids {
		unfinished, _ := e.backfillRuns(id)
		require.Len(t, unfinished, 1, "backfill %d: one run at a time", i)
	}
	// When a run ends, its backfill has room again and is served.
	first, _ := e.backfillRuns(ids[0])
	e.endRuns(first)
	n, err = releaser.ReleaseDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	unfinished, all := e.backfillRuns(ids[0])
	require.Len(t, unfinished, 1)
	require.Len(t, all, 2)
}

// TestABackfillPassWritesAtMostItsTasks: a pass writes at most MaxTasks
// tasks (here 10, a job of 4 shards): a backfill of max_concurrent 10
// releases 2 runs a pass, not 10. A pass released up to 1,000 runs of any
// number of shards before (10 million tasks of a 10,000-shard job), past
// any statement timeout.
func TestABackfillPassWritesAtMostItsTasks(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	job := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr, j.Timezone, j.ShardCount = "0 30 1 * * ?", "Europe/London", 4 })
	from := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC)
	b, err := queue.NewBackfillService(e.pool, nil, nil).Create(ctx,
		&queue.BackfillRequest{JobID: job.ID, From: from, To: from.AddDate(0, 0, 10), MaxConcurrent: 10})
	require.NoError(t, err)
	releaser := schedule.NewBackfillReleaser(e.pool, nil, schedule.BackfillReleaserConfig{MaxTasks: 10})
	for _, want := range []int{2, 4, 6} {
		_, err := releaser.ReleaseDue(ctx)
		require.NoError(t, err)
		unfinished, _ := e.backfillRuns(b.ID)
		require.Len(t, unfinished, want)
	}
}
