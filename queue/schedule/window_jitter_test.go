package schedule_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// scheduledFors lists the ticks job id fired, oldest first.
func (e *env) scheduledFors(id uuid.UUID) []time.Time {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(),
		`SELECT scheduled_for FROM ax.all_executions WHERE job_id = $1 ORDER BY scheduled_for`, id)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var at time.Time
		require.NoError(e.t, rows.Scan(&at))
		out = append(out, at.UTC())
	}
	require.NoError(e.t, rows.Err())
	return out
}

// TestActiveWindowThroughTheLoop: a cron job fires only on the ticks of
// [active_from, active_until), then has no next fire; explain says why
// the ticks on either side did not fire.
func TestActiveWindowThroughTheLoop(t *testing.T) {
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
	from := time.Now().UTC().Truncate(time.Minute).Add(5 * time.Minute)
	until := from.Add(3 * time.Minute)
	j := e.job(axtype.TriggerCron, func(j *axtype.Job) {
		j.CronExpr = "0 * * * * *"
		j.ActiveFrom, j.ActiveUntil = &from, &until
	})
	require.Equal(t, from, *j.NextFireAt, "the first fire is the first tick at active_from")

	require.Zero(t, fireAt(from.Add(-time.Minute)), "the tick before the window is not due")
	for i := range 3 {
		require.Equal(t, 1, fireAt(from.Add(time.Duration(i)*time.Minute)))
	}
	got, err := db.JobGetByID(context.Background(), e.pool, j.ID)
	require.NoError(t, err)
	require.Nil(t, got.NextFireAt, "the tick at active_until is outside: no next fire")
	require.Zero(t, fireAt(until.Add(10*time.Minute)))
	require.Equal(t, []time.Time{from, from.Add(time.Minute), from.Add(2 * time.Minute)}, e.scheduledFors(j.ID))

	explain := queue.NewExecutionService(e.pool, nil, nil)
	for _, at := range []time.Time{from.Add(-time.Minute), until} {
		x, err := explain.Explain(context.Background(), j.ID, at, false)
		require.NoError(t, err)
		require.Equal(t, queue.VerdictOutsideWindow, x.Verdict, at)
		require.Contains(t, x.Reason, "outside the active window")
	}
}

// TestActiveWindowInterval: before its window an interval job starts at
// active_from itself, and stops at active_until.
func TestActiveWindowInterval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	from := time.Now().UTC().Add(time.Hour).Truncate(time.Second)
	until := from.Add(25 * time.Second)
	j := e.job(axtype.TriggerInterval, func(j *axtype.Job) {
		j.IntervalSeconds = 10
		j.ActiveFrom, j.ActiveUntil = &from, &until
	})
	require.Equal(t, from, *j.NextFireAt)

	c := clock.New()
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})
	for _, at := range []time.Time{from, from.Add(10 * time.Second), from.Add(20 * time.Second), until.Add(time.Minute)} {
		c.Set(at)
		_, err := loop.FireDue(context.Background())
		require.NoError(t, err)
	}
	require.Equal(t, []time.Time{from, from.Add(10 * time.Second), from.Add(20 * time.Second)}, e.scheduledFors(j.ID))
	got, err := db.JobGetByID(context.Background(), e.pool, j.ID)
	require.NoError(t, err)
	require.Nil(t, got.NextFireAt)
}

// TestJitterOffsetMatchesSQL holds schedule.JitterOffset (previews) and
// ax.jitter_offset (the tasks' not_before) to one rule.
func TestJitterOffsetMatchesSQL(t *testing.T) {
	t.Parallel()
	e := setup(t)
	r := rand.New(rand.NewPCG(41, 42))
	for range 300 {
		job := uuid.New()
		tick := time.Unix(r.Int64N(4_000_000_000), 0).UTC()
		jitter := []int{0, 1, 7, 30, 3600, schedule.MaxJitterSeconds}[r.IntN(6)]
		var ms int64
		require.NoError(t, e.pool.QueryRow(context.Background(),
			`SELECT round(extract(epoch FROM ax.jitter_offset($1, $2, $3)) * 1000)::bigint`, job, tick, jitter).Scan(&ms))
		got := schedule.JitterOffset(job, tick, jitter)
		require.Equal(t, time.Duration(ms)*time.Millisecond, got, "job %s tick %s jitter %d", job, tick, jitter)
		require.True(t, got >= 0 && (jitter == 0 || got < time.Duration(jitter)*time.Second))
	}
}

// TestJitterAcrossTwoReplicas: two trigger loops (two replicas) fire the
// same ticks of 20 jittered jobs at once. Each tick fires once, and every
// run's tasks wait for the tick plus the offset the Go rule gives, in
// [0, jitter): whichever replica fired it.
func TestJitterAcrossTwoReplicas(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const jitter = 30
	var jobs []*axtype.Job
	for range 20 {
		jobs = append(jobs, e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "0 * * * * *"; j.JitterSeconds = jitter }))
	}
	c := clock.New()
	loops := []*schedule.TriggerLoop{
		schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c, BatchSize: 3}),
		schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c, BatchSize: 3}),
	}
	// Their first tick is the same minute, even when making them crossed
	// a minute's end (under load).
	first := *jobs[0].NextFireAt
	ids := make([]uuid.UUID, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	_, err := e.pool.Exec(context.Background(), "UPDATE ax.trigger SET next_fire_at = $1 WHERE job_id = ANY($2)", first, ids)
	require.NoError(t, err)
	for tick := range 2 {
		c.Set(first.Add(time.Duration(tick) * time.Minute))
		var wg sync.WaitGroup
		for _, l := range loops {
			wg.Go(func() {
				for {
					n, err := l.FireDue(context.Background())
					if err != nil {
						t.Error(err) // FailNow belongs to the test's goroutine
					}
					if err != nil || n == 0 {
						return
					}
				}
			})
		}
		wg.Wait()
	}
	offsets := map[time.Duration]bool{}
	for _, j := range jobs {
		require.Equal(t, []time.Time{first, first.Add(time.Minute)}, e.scheduledFors(j.ID), "each tick fired once")
		rows, err := e.pool.Query(context.Background(),
			`SELECT e.scheduled_for, t.not_before FROM ax.all_executions e JOIN ax.task t ON t.execution_id = e.id
			 WHERE e.job_id = $1`, j.ID)
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			var scheduled, notBefore time.Time
			require.NoError(t, rows.Scan(&scheduled, &notBefore))
			want := schedule.JitterOffset(j.ID, scheduled, jitter)
			require.Equal(t, want, notBefore.Sub(scheduled), "job %s tick %s", j.ID, scheduled)
			require.Less(t, want, jitter*time.Second)
			offsets[want] = true
			n++
		}
		require.NoError(t, rows.Err())
		rows.Close()
		require.Equal(t, 2, n)
	}
	require.Greater(t, len(offsets), 30, "40 ticks spread over the jitter, not bunched")
}

// TestUpcomingHonoursTheActiveWindow: the upcoming hour lists a windowed
// job's ticks up to active_until only, while a job on the same cron
// without a window lists all of them.
func TestUpcomingHonoursTheActiveWindow(t *testing.T) {
	t.Parallel()
	e := setup(t)
	plain := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "0 * * * * *" })
	until := time.Now().UTC().Truncate(time.Minute).Add(10*time.Minute + 30*time.Second)
	windowed := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "0 * * * * *"; j.ActiveUntil = &until })

	_, err := schedule.NewUpcoming(e.pool, nil, schedule.UpcomingConfig{}).Pass(context.Background())
	require.NoError(t, err)
	count := func(id uuid.UUID) int {
		return e.count(`SELECT count(*) FROM ax.upcoming_hour WHERE job_id = $1`, id)
	}
	require.InDelta(t, 60, count(plain.ID), 1)
	require.InDelta(t, 10, count(windowed.ID), 1)
	require.Zero(t, e.count(`SELECT count(*) FROM ax.upcoming_hour WHERE job_id = $1 AND next_fire_at >= $2`, windowed.ID, until))
}
