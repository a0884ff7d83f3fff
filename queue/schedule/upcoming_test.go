package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// ax.upcoming_hour lists every fire of the hour of cron and interval jobs
// (as the replicas computed them), the one of a delay job, none of a
// paused job; a second replica's pass while the first holds the lock
// changes nothing.
func TestUpcomingHourListsEveryFire(t *testing.T) {
	t.Parallel()
	e := setup(t)
	every10s := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "*/10 * * * * *" })
	every5m := e.job(axtype.TriggerInterval, func(j *axtype.Job) { j.IntervalSeconds = 300 })
	later := time.Now().Add(30 * time.Minute).UTC().Truncate(time.Second)
	once := e.job(axtype.TriggerDelay, func(j *axtype.Job) { j.RunAt = &later })
	paused := e.job(axtype.TriggerCron, nil)
	_, err := e.jobs.Pause(context.Background(), paused.ID)
	require.NoError(t, err)

	u := schedule.NewUpcoming(e.pool, nil, schedule.UpcomingConfig{})
	n, err := u.Pass(context.Background())
	require.NoError(t, err)
	require.Greater(t, n, 360)

	count := func(id any) int {
		return e.count(`SELECT count(*) FROM ax.upcoming_hour WHERE job_id = $1`, id)
	}
	require.InDelta(t, 360, count(every10s.ID), 2, "every 10 s for an hour")
	require.InDelta(t, 12, count(every5m.ID), 1, "every 5 min for an hour")
	require.Equal(t, 1, count(once.ID))
	require.Zero(t, count(paused.ID))
	var first time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT min(next_fire_at) FROM ax.upcoming_hour WHERE job_id = $1`, every10s.ID).Scan(&first))
	require.Zero(t, first.Second()%10, "on the cron's grid")

	// Another replica's timer finds the list fresh and leaves it; once it
	// is half a period old, it lists again.
	n, err = u.PassIfStale(context.Background())
	require.NoError(t, err)
	require.Zero(t, n, "fresh: not listed again")
	_, err = e.pool.Exec(context.Background(), `UPDATE ax.upcoming_fire_pass SET computed_at = now() - interval '20 seconds'`)
	require.NoError(t, err)
	n, err = u.PassIfStale(context.Background())
	require.NoError(t, err)
	require.Greater(t, n, 360, "stale: listed again")

	// A pass that finds the lock held (another replica's) writes nothing.
	tx, err := e.pool.Begin(context.Background())
	require.NoError(t, err)
	defer tx.Rollback(context.Background())
	locked, err := db.UpcomingFireLock(context.Background(), tx)
	require.NoError(t, err)
	require.True(t, locked)
	n, err = u.Pass(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

// TestUpcomingPassWritesOnlyWhatChanged: a pass half a minute after the
// last leaves the ticks both list where they are, deletes the ones now
// past and adds the new ones at the end of the hour; a paused job's ticks
// go at the next pass.
func TestUpcomingPassWritesOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	e := setup(t)
	every10s := e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "*/10 * * * * *" })
	every5m := e.job(axtype.TriggerInterval, func(j *axtype.Job) { j.IntervalSeconds = 300 })
	c := clock.New()
	c.Set(time.Now().UTC().Truncate(10 * time.Second).Add(5 * time.Second)) // between two ticks
	u := schedule.NewUpcoming(e.pool, nil, schedule.UpcomingConfig{Clock: c})
	_, err := u.Pass(context.Background())
	require.NoError(t, err)
	type tick struct {
		at   time.Time
		xmin string
	}
	ticks := func(id any) []tick {
		rows, err := e.pool.Query(context.Background(),
			`SELECT fire_at, xmin::text FROM ax.upcoming_fire WHERE job_id = $1 ORDER BY fire_at`, id)
		require.NoError(t, err)
		var out []tick
		for rows.Next() {
			var k tick
			require.NoError(t, rows.Scan(&k.at, &k.xmin))
			out = append(out, k)
		}
		require.NoError(t, rows.Err())
		return out
	}
	before := ticks(every10s.ID)

	c.Advance(30 * time.Second)
	_, err = u.Pass(context.Background())
	require.NoError(t, err)
	after := ticks(every10s.ID)
	require.Len(t, after, len(before))
	require.Equal(t, before[3:], after[:len(after)-3], "the ticks both passes list are the same rows, not written again")
	for _, k := range after[len(after)-3:] {
		require.NotEqual(t, before[0].xmin, k.xmin, "the three new ticks are new rows")
	}
	require.Equal(t, before[len(before)-1].at.Add(30*time.Second), after[len(after)-1].at)

	_, err = e.jobs.Pause(context.Background(), every5m.ID)
	require.NoError(t, err)
	_, err = u.Pass(context.Background())
	require.NoError(t, err)
	require.Empty(t, ticks(every5m.ID), "a paused job's ticks are deleted")
	require.Equal(t, after, ticks(every10s.ID), "the other job's are left alone")
}

// TestUpcomingCapLeavesOutTheSameJobs: when the pass's cap cuts the
// list, the newest jobs are left out, pass after pass, whichever is due
// first and however the rows moved (a pause and resume rewrites a job's
// trigger).
func TestUpcomingCapLeavesOutTheSameJobs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	var jobs []*axtype.Job
	for range 3 {
		jobs = append(jobs, e.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "*/10 * * * * *" }))
	}
	u := schedule.NewUpcoming(e.pool, nil, schedule.UpcomingConfig{MaxTotal: 800}) // two jobs' 363 ticks
	listed := func() []bool {
		var out []bool
		for _, j := range jobs {
			out = append(out, e.count(`SELECT count(*) FROM ax.upcoming_fire WHERE job_id = $1`, j.ID) > 0)
		}
		return out
	}
	e.behind(jobs[2].ID, time.Minute) // the newest job is due first
	for range 3 {
		_, err := u.Pass(context.Background())
		require.NoError(t, err)
		require.Equal(t, []bool{true, true, false}, listed(), "the two oldest jobs")
		for _, j := range jobs[:2] {
			_, err = e.jobs.Pause(context.Background(), j.ID)
			require.NoError(t, err)
			_, err = e.jobs.Resume(context.Background(), j.ID)
			require.NoError(t, err)
		}
	}
}

// BenchmarkUpcomingPass: the upcoming list's pass as the timer runs it,
// every 30 s of the list's clock, with 60 every-second jobs (55 of them
// fit under the pass's cap of 200,000 ticks: 198,000 listed each time).
func BenchmarkUpcomingPass(b *testing.B) {
	e := setup(b)
	for range 60 {
		e.job(axtype.TriggerCron, nil)
	}
	c := clock.New()
	c.Set(time.Now())
	u := schedule.NewUpcoming(e.pool, nil, schedule.UpcomingConfig{Clock: c})
	_, err := u.Pass(context.Background())
	require.NoError(b, err)
	b.ResetTimer()
	for range b.N {
		c.Advance(30 * time.Second)
		n, err := u.Pass(context.Background())
		require.NoError(b, err)
		require.Equal(b, 55*3600, n) // the jobs that fit under the cap of 200,000
	}
}
