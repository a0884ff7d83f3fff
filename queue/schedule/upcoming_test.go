package schedule_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// ax.upcoming_hour lists every fire of the hour of cron and interval jobs
// (as the replicas computed them), the one of a delay job, none of a
// paused job; a second replica's pass while the first holds the lock
// changes nothing.
func TestUpcomingHourListsEveryFire(t *testing.T) {
	t.Parallel()
	e := setup(t)
	every10s := e.job(db.TriggerCron, func(j *db.Job) { j.CronExpr = "*/10 * * * * *" })
	every5m := e.job(db.TriggerInterval, func(j *db.Job) { j.IntervalSeconds = 300 })
	later := time.Now().Add(30 * time.Minute).UTC().Truncate(time.Second)
	once := e.job(db.TriggerDelay, func(j *db.Job) { j.RunAt = &later })
	paused := e.job(db.TriggerCron, nil)
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
	_, err = e.pool.Exec(context.Background(), `UPDATE ax.upcoming_fire SET computed_at = now() - interval '20 seconds'`)
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
