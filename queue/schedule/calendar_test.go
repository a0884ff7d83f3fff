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

// calendarLoop is a trigger loop on a settable clock, with helpers to
// place a job's next tick and fire at an instant.
type calendarLoop struct {
	*env
	clock *clock.Clock
	loop  *schedule.TriggerLoop
}

func setupCalendars(t *testing.T) *calendarLoop {
	e := setup(t)
	c := clock.New()
	return &calendarLoop{env: e, clock: c,
		loop: schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})}
}

func (l *calendarLoop) calendar(c *axtype.Calendar) *axtype.Calendar {
	l.t.Helper()
	got, err := db.CalendarInsert(context.Background(), l.pool, c)
	require.NoError(l.t, err)
	return got
}

// daily makes a job firing every day at hh:00 UTC, excluding cals, whose
// next tick is first.
func (l *calendarLoop) daily(cronExpr string, first time.Time, cals ...string) *axtype.Job {
	l.t.Helper()
	j := l.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr, j.Exclude = cronExpr, cals })
	_, err := l.pool.Exec(context.Background(), `UPDATE ax.trigger SET next_fire_at = $2 WHERE job_id = $1`, j.ID, first)
	require.NoError(l.t, err)
	return j
}

// fireAt fires what is due at the instant.
func (l *calendarLoop) fireAt(at time.Time) {
	l.t.Helper()
	l.clock.Set(at)
	_, err := l.loop.FireDue(context.Background())
	require.NoError(l.t, err)
}

func (l *calendarLoop) skips(id uuid.UUID) []*axtype.SkippedFire {
	l.t.Helper()
	s, err := db.SkippedFireListByJob(context.Background(), l.pool, id, 100)
	require.NoError(l.t, err)
	return s
}

func day(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

// TestCalendarSkipsItsDateInItsOwnTimezone: a job at 20:00 UTC excludes a
// calendar of Asia/Shanghai (UTC+8) listing 2026-12-25. Its tick of
// 2026-12-24T20:00Z is 04:00 on the 25th in Shanghai: skipped with reason
// calendar and the calendar's name; the ticks on either side fire.
// Explain answers "excluded" before the tick and "skipped" after it.
func TestCalendarSkipsItsDateInItsOwnTimezone(t *testing.T) {
	t.Parallel()
	l := setupCalendars(t)
	l.calendar(&axtype.Calendar{Name: "cn-holidays", Timezone: "Asia/Shanghai",
		Entries: []axtype.CalendarEntry{{Date: "2026-12-25"}}})
	j := l.daily("0 0 20 * * *", day("2026-12-23T20:00:00Z"), "cn-holidays")
	explain := queue.NewExecutionService(l.pool, nil, nil)

	x, err := explain.Explain(context.Background(), j.ID, day("2026-12-24T20:00:00Z"), false)
	require.NoError(t, err)
	require.Equal(t, queue.VerdictExcluded, x.Verdict)
	require.Contains(t, x.Reason, "excluded by calendar cn-holidays: 2026-12-25 (in Asia/Shanghai)")

	for _, at := range []string{"2026-12-23T20:00:00Z", "2026-12-24T20:00:00Z", "2026-12-25T20:00:00Z"} {
		l.fireAt(day(at))
	}
	require.Equal(t, []time.Time{day("2026-12-23T20:00:00Z"), day("2026-12-25T20:00:00Z")}, l.scheduledFors(j.ID))
	skips := l.skips(j.ID)
	require.Len(t, skips, 1)
	require.Equal(t, axtype.SkipCalendar, skips[0].Reason)
	require.Equal(t, "excluded by calendar cn-holidays", skips[0].Detail)
	require.Equal(t, day("2026-12-24T20:00:00Z"), skips[0].FirstTick)
	require.Equal(t, 1, skips[0].TickCount)

	x, err = explain.Explain(context.Background(), j.ID, day("2026-12-24T20:00:00Z"), false)
	require.NoError(t, err)
	require.Equal(t, queue.VerdictSkipped, x.Verdict)
	require.Contains(t, x.Reason, "(calendar): excluded by calendar cn-holidays")
}

// TestCalendarEditTakesEffectOnTheNextTick: removing a date from a
// calendar un-skips its tick, and adding one skips it, without the job
// being written.
func TestCalendarEditTakesEffectOnTheNextTick(t *testing.T) {
	t.Parallel()
	l := setupCalendars(t)
	cal := l.calendar(&axtype.Calendar{Name: "plant-shutdown", Timezone: "UTC",
		Entries: []axtype.CalendarEntry{{Date: "2026-12-28"}, {Date: "2026-12-29"}}})
	j := l.daily("0 0 9 * * *", day("2026-12-27T09:00:00Z"), "plant-shutdown")
	before := l.count(`SELECT count(*) FROM ax.job WHERE id = $1 AND updated_at = $2`, j.ID, j.UpdatedAt)
	require.Equal(t, 1, before)

	l.fireAt(day("2026-12-27T09:00:00Z")) // fires; the loop now caches the calendar
	cal.Entries = []axtype.CalendarEntry{{Date: "2026-12-29"}, {Date: "2026-12-30"}}
	_, err := db.CalendarUpdate(context.Background(), l.pool, cal)
	require.NoError(t, err)
	for _, at := range []string{"2026-12-28T09:00:00Z", "2026-12-29T09:00:00Z", "2026-12-30T09:00:00Z", "2026-12-31T09:00:00Z"} {
		l.fireAt(day(at))
	}
	require.Equal(t, []time.Time{day("2026-12-27T09:00:00Z"), day("2026-12-28T09:00:00Z"), day("2026-12-31T09:00:00Z")},
		l.scheduledFors(j.ID), "the 28th fires once removed, the 30th skips once added")
	require.Equal(t, 1, l.count(`SELECT count(*) FROM ax.job WHERE id = $1 AND updated_at = $2`, j.ID, j.UpdatedAt),
		"the job was not written")
	var skipped []time.Time
	for _, s := range l.skips(j.ID) {
		require.Equal(t, axtype.SkipCalendar, s.Reason)
		skipped = append(skipped, s.FirstTick)
	}
	require.ElementsMatch(t, []time.Time{day("2026-12-29T09:00:00Z"), day("2026-12-30T09:00:00Z")}, skipped)
}

// TestCalendarYearlyRuleAndRange: a yearly 01-01 and a range 2027-01-05..
// 2027-01-06 skip their days; the days between fire.
func TestCalendarYearlyRuleAndRange(t *testing.T) {
	t.Parallel()
	l := setupCalendars(t)
	l.calendar(&axtype.Calendar{Name: "new-year", Timezone: "Europe/Berlin",
		Entries: []axtype.CalendarEntry{{Yearly: "01-01"}}})
	l.calendar(&axtype.Calendar{Name: "stocktake", Timezone: "UTC",
		Entries: []axtype.CalendarEntry{{From: "2027-01-05", To: "2027-01-06"}}})
	j := l.daily("0 0 9 * * *", day("2026-12-31T09:00:00Z"), "new-year", "stocktake")
	first := day("2026-12-31T09:00:00Z")
	for i := range 8 {
		l.fireAt(first.AddDate(0, 0, i))
	}
	var want []time.Time
	for _, d := range []int{0, 2, 3, 4, 7} { // 12-31, 01-02..04, 01-07
		want = append(want, first.AddDate(0, 0, d))
	}
	require.Equal(t, want, l.scheduledFors(j.ID))
	details := map[string]int{}
	for _, s := range l.skips(j.ID) {
		require.Equal(t, axtype.SkipCalendar, s.Reason)
		details[s.Detail] += s.TickCount
	}
	require.Equal(t, map[string]int{"excluded by calendar new-year": 1, "excluded by calendar stocktake": 2}, details)
}

// TestUpcomingFiresLeaveOutExcludedTicks: the upcoming-fires list (the
// preview of the coming hour) has no tick on an excluded date, and a job
// without exclude keeps all of its own.
func TestUpcomingFiresLeaveOutExcludedTicks(t *testing.T) {
	t.Parallel()
	l := setupCalendars(t)
	l.calendar(&axtype.Calendar{Name: "cn-holidays", Timezone: "Asia/Shanghai",
		Entries: []axtype.CalendarEntry{{Date: "2026-12-25"}}})
	excluding := l.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr, j.Exclude = "0 */10 * * * *", []string{"cn-holidays"} })
	plain := l.job(axtype.TriggerCron, func(j *axtype.Job) { j.CronExpr = "0 */10 * * * *" })
	// Midnight in Shanghai is 16:00 UTC: from then on the 25th is excluded.
	now := day("2026-12-24T15:25:00Z")
	u := schedule.NewUpcoming(l.pool, nil, schedule.UpcomingConfig{Clock: l.clock, Horizon: time.Hour})
	l.clock.Set(now)
	_, err := u.Pass(context.Background())
	require.NoError(t, err)
	ticks := func(id uuid.UUID) []time.Time {
		rows, err := l.pool.Query(context.Background(), `SELECT fire_at FROM ax.upcoming_fire WHERE job_id = $1 ORDER BY fire_at`, id)
		require.NoError(t, err)
		defer rows.Close()
		var out []time.Time
		for rows.Next() {
			var at time.Time
			require.NoError(t, rows.Scan(&at))
			out = append(out, at.UTC())
		}
		return out
	}
	require.Equal(t, []time.Time{day("2026-12-24T15:30:00Z"), day("2026-12-24T15:40:00Z"), day("2026-12-24T15:50:00Z")},
		ticks(excluding.ID))
	require.Len(t, ticks(plain.ID), 6)
}
