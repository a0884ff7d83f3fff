package schedule_test

import (
	"context"
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

// multiJob creates a job with several triggers, its first fire planned as
// the job service plans it.
func (e *env) multiJob(specs ...axtype.TriggerSpec) *axtype.Job {
	e.t.Helper()
	return e.job(specs[0].Kind, func(j *axtype.Job) {
		j.CronExpr, j.Timezone, j.IntervalSeconds = specs[0].CronExpr, specs[0].Timezone, specs[0].IntervalSeconds
		j.Triggers = specs
	})
}

// firedRun is one run of a job as the database keeps it.
type firedRun struct {
	scheduledFor time.Time
	triggerIndex *int
}

func (e *env) runs(id uuid.UUID) []firedRun {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(),
		`SELECT scheduled_for, trigger_index FROM ax.all_executions WHERE job_id = $1 ORDER BY scheduled_for`, id)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []firedRun
	for rows.Next() {
		var r firedRun
		var idx *int16
		require.NoError(e.t, rows.Scan(&r.scheduledFor, &idx))
		if idx != nil {
			i := int(*idx)
			r.triggerIndex = &i
		}
		r.scheduledFor = r.scheduledFor.UTC()
		out = append(out, r)
	}
	require.NoError(e.t, rows.Err())
	return out
}

// fireNext moves the settable clock to the job's next fire and runs one
// batch of the trigger loop there; it returns the instant.
func (e *env) fireNext(loop *schedule.TriggerLoop, c *clock.Clock, id uuid.UUID) time.Time {
	e.t.Helper()
	j, err := db.JobGetByID(context.Background(), e.pool, id)
	require.NoError(e.t, err)
	require.NotNil(e.t, j.NextFireAt)
	at := *j.NextFireAt
	c.Set(at)
	_, err = loop.FireDue(context.Background())
	require.NoError(e.t, err)
	return at
}

func ptr[T any](v T) *T { return &v }

// TestTriggersCollidingMakeOneRun: 09:00 in Berlin and 08:00 in London
// are one instant in winter: the two triggers make one run, recorded as
// the first trigger's; a third trigger's tick half an hour later records
// its own index. Firing the instant again adds nothing.
func TestTriggersCollidingMakeOneRun(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := clock.New()
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})
	// From tomorrow: the first tick is the collided one. London and
	// Berlin change their clocks the same day, so the two meet every day.
	from := time.Now().UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	specs := []axtype.TriggerSpec{
		{Kind: axtype.TriggerCron, CronExpr: "0 0 9 * * *", Timezone: "Europe/Berlin"},
		{Kind: axtype.TriggerCron, CronExpr: "0 0 8 * * *", Timezone: "Europe/London"},
		{Kind: axtype.TriggerCron, CronExpr: "0 30 9 * * *", Timezone: "Europe/Berlin"},
	}
	j := e.job(axtype.TriggerCron, func(j *axtype.Job) {
		j.CronExpr, j.Timezone, j.Triggers, j.ActiveFrom = specs[0].CronExpr, specs[0].Timezone, specs, &from
	})
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	first := e.fireNext(loop, c, j.ID)
	require.Equal(t, 9, first.In(berlin).Hour(), first)
	second := e.fireNext(loop, c, j.ID)
	require.Equal(t, first.Add(30*time.Minute), second)

	// The collided instant again: the exactly-once index and the trigger
	// row's last tick keep it at one run.
	c.Set(first)
	_, err = loop.FireDue(context.Background())
	require.NoError(t, err)
	require.Equal(t, []firedRun{{first, ptr(0)}, {second, ptr(2)}}, e.runs(j.ID))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.execution WHERE job_id = $1 AND scheduled_for = $2`, j.ID, first))

	// Explain lists the triggers: the first two tick at the collided
	// instant, the third does not, and the reason names the one that fired.
	x, err := queue.NewExecutionService(e.pool, nil, nil).Explain(context.Background(), j.ID, first, false)
	require.NoError(t, err)
	require.Equal(t, queue.VerdictFired, x.Verdict)
	require.Contains(t, x.Reason, "fired by triggers[0]")
	require.Equal(t, ptr(0), x.Execution.TriggerIndex)
	require.Len(t, x.Triggers, 3)
	require.True(t, x.Triggers[0].Tick)
	require.True(t, x.Triggers[1].Tick)
	require.False(t, x.Triggers[2].Tick)
	require.Equal(t, second, *x.Triggers[2].NextTick, "the third trigger's own next tick")
	require.Equal(t, first.Add(24*time.Hour), *x.Triggers[0].NextTick)
	require.Equal(t, second, *x.NextTick, "the job's next tick is the earliest of its triggers'")
}

// TestTriggersWeekdaysAndWeekends: weekdays at 09:00 in Berlin and
// weekends at 12:00 in New York fire once a day for a week, each on its
// own clock, and each run records its trigger.
func TestTriggersWeekdaysAndWeekends(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := clock.New()
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})
	j := e.multiJob(
		axtype.TriggerSpec{Kind: axtype.TriggerCron, CronExpr: "0 9 * * 1-5", Timezone: "Europe/Berlin"},
		axtype.TriggerSpec{Kind: axtype.TriggerCron, CronExpr: "0 12 * * 6,0", Timezone: "America/New_York"},
	)
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	newYork, err := time.LoadLocation("America/New_York")
	require.NoError(t, err)

	var fired []time.Time
	for range 7 {
		fired = append(fired, e.fireNext(loop, c, j.ID))
	}
	// What a person expects: for each of the 7 days from the first fire's
	// (Berlin 09:00 and New York 12:00 are the same UTC day), the
	// weekday tick in Berlin or the weekend tick in New York.
	var want []firedRun
	y, m, d := fired[0].In(berlin).Date()
	for i := range 7 {
		day := time.Date(y, m, d+i, 12, 0, 0, 0, time.UTC)
		if wd := day.Weekday(); wd == time.Saturday || wd == time.Sunday {
			want = append(want, firedRun{time.Date(y, m, d+i, 12, 0, 0, 0, newYork).UTC(), ptr(1)})
		} else {
			want = append(want, firedRun{time.Date(y, m, d+i, 9, 0, 0, 0, berlin).UTC(), ptr(0)})
		}
	}
	require.Equal(t, want, e.runs(j.ID))
	weekdays := 0
	for _, r := range want {
		if *r.triggerIndex == 0 {
			weekdays++
		}
	}
	require.Equal(t, 5, weekdays, "a week has five weekday runs and two weekend runs")
}

// TestTriggersIntervalGrid: an interval in a list ticks on its grid from
// active_from, whatever the other triggers do, and the loop's ticks are
// the merge of the cron's and the interval's.
func TestTriggersIntervalGrid(t *testing.T) {
	t.Parallel()
	e := setup(t)
	c := clock.New()
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})
	from := time.Now().UTC().Truncate(time.Hour).Add(2*time.Hour + 10*time.Second)
	j := e.job(axtype.TriggerCron, func(j *axtype.Job) {
		j.CronExpr, j.Timezone = "0 0 * * * *", "UTC"
		j.Triggers = []axtype.TriggerSpec{
			{Kind: axtype.TriggerCron, CronExpr: "0 0 * * * *", Timezone: "UTC"},
			{Kind: axtype.TriggerInterval, IntervalSeconds: 1200},
		}
		j.ActiveFrom = &from
	})
	var got []time.Time
	for range 5 {
		got = append(got, e.fireNext(loop, c, j.ID))
	}
	hour := from.Truncate(time.Hour)
	require.Equal(t, []time.Time{from, from.Add(20 * time.Minute), from.Add(40 * time.Minute),
		hour.Add(time.Hour), from.Add(time.Hour)}, got)
	runs := e.runs(j.ID)
	require.Equal(t, ptr(1), runs[0].triggerIndex)
	require.Equal(t, ptr(0), runs[3].triggerIndex)
}

// TestTriggersListFires: the preview of a list merges the triggers'
// fires and names the triggers of each.
func TestTriggersListFires(t *testing.T) {
	t.Parallel()
	after := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC) // a Friday
	next, by, err := schedule.ListFires([]axtype.TriggerSpec{
		{Kind: axtype.TriggerCron, CronExpr: "0 9 * * 1-5", Timezone: "Europe/Berlin"},
		{Kind: axtype.TriggerCron, CronExpr: "0 12 * * 6,0", Timezone: "America/New_York"},
		{Kind: axtype.TriggerCron, CronExpr: "0 8 * * *", Timezone: "UTC"},
	}, after, 4)
	require.NoError(t, err)
	require.Equal(t, []time.Time{
		time.Date(2027, 1, 1, 8, 0, 0, 0, time.UTC),  // Friday: Berlin 09:00 is 08:00 UTC, with the daily one
		time.Date(2027, 1, 2, 8, 0, 0, 0, time.UTC),  // Saturday: the daily one
		time.Date(2027, 1, 2, 17, 0, 0, 0, time.UTC), // Saturday 12:00 in New York
		time.Date(2027, 1, 3, 8, 0, 0, 0, time.UTC),
	}, next)
	require.Equal(t, [][]int{{0, 2}, {2}, {1}, {2}}, by)
}

// TestUpcomingListsEveryTrigger: the upcoming hour of a job with two
// triggers holds both triggers' ticks, an instant they share once.
func TestUpcomingListsEveryTrigger(t *testing.T) {
	t.Parallel()
	e := setup(t)
	j := e.multiJob(
		axtype.TriggerSpec{Kind: axtype.TriggerCron, CronExpr: "0 */10 * * * *", Timezone: "UTC"},
		axtype.TriggerSpec{Kind: axtype.TriggerCron, CronExpr: "0 */15 * * * *", Timezone: "Asia/Kolkata"},
	)
	_, err := schedule.NewUpcoming(e.pool, nil, schedule.UpcomingConfig{}).Pass(context.Background())
	require.NoError(t, err)
	rows, err := e.pool.Query(context.Background(), `SELECT fire_at FROM ax.upcoming_fire WHERE job_id = $1 ORDER BY fire_at`, j.ID)
	require.NoError(t, err)
	var fires []time.Time
	for rows.Next() {
		var at time.Time
		require.NoError(t, rows.Scan(&at))
		fires = append(fires, at.UTC())
	}
	require.NoError(t, rows.Err())
	// Kolkata is UTC+05:30: its quarter hours are UTC's. An hour holds
	// :00 :10 :15 :20 :30 :40 :45 :50, eight distinct instants (the
	// listing spans an hour and a pass period, so a few more).
	require.GreaterOrEqual(t, len(fires), 8)
	seen := map[int]bool{}
	for i, f := range fires {
		require.True(t, f.Minute()%10 == 0 || f.Minute()%15 == 0, f)
		require.Zero(t, f.Second())
		if i > 0 {
			require.True(t, f.After(fires[i-1]), "no instant twice")
		}
		seen[f.Minute()] = true
	}
	for _, m := range []int{15, 45, 10, 50} {
		require.True(t, seen[m], "minute %d: both triggers' ticks are listed", m)
	}
}
