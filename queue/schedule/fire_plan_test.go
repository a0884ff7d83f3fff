package schedule

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// everySecond ticks on whole seconds.
type everySecond struct{}

func (everySecond) next(_ *axtype.DueTrigger, after time.Time) (*time.Time, error) {
	next := after.Truncate(time.Second).Add(time.Second)
	return &next, nil
}

func (e everySecond) atOrAfter(t *axtype.DueTrigger, x time.Time) (*time.Time, error) {
	return e.next(t, x.Add(-time.Nanosecond))
}

func TestPlanner(t *testing.T) {
	t.Parallel()
	base := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p := &planner{misfireThreshold: 5 * time.Second, ticks: everySecond{}}
	due := func(policy axtype.MisfirePolicy, behind time.Duration) *axtype.DueTrigger {
		return &axtype.DueTrigger{JobID: uuid.New(), MisfirePolicy: policy, MisfireWindowSeconds: 3600,
			MisfireMaxFires: 10, ConcurrencyPolicy: "allow", NextFireAt: base.Add(-behind)}
	}
	count := func(plan *firePlan) (fires, catchUps, skipped int) {
		for _, f := range plan.fires {
			fires++
			if f.catchUp {
				catchUps++
			}
		}
		for _, s := range plan.skips {
			skipped += s.TickCount
		}
		return
	}

	t.Run("on time", func(t *testing.T) {
		plan, err := p.plan(due("fire_once", 0), base.Add(3*time.Millisecond))
		require.NoError(t, err)
		require.Equal(t, []plannedFire{{scheduledFor: base}}, plan.fires)
		require.Empty(t, plan.skips)
		require.Equal(t, base.Add(time.Second), *plan.next, "next tick from the scheduled time, not now")
	})
	t.Run("fire_once folds an outage into one catch-up", func(t *testing.T) {
		plan, err := p.plan(due("fire_once", 60*time.Second), base)
		require.NoError(t, err)
		fires, catchUps, skipped := count(plan)
		require.Equal(t, 1, catchUps)
		require.Equal(t, base.Add(-60*time.Second), plan.fires[0].scheduledFor)
		require.Equal(t, 6, fires-catchUps, "ticks within the threshold are on time")
		require.Equal(t, 61, fires+skipped, "every tick is fired or recorded")
		require.Len(t, plan.skips, 1, "consecutive skips are one range")
		require.Equal(t, base.Add(-59*time.Second), plan.skips[0].FirstTick)
		require.Equal(t, axtype.SkipMisfire, plan.skips[0].Reason)
	})
	t.Run("fire_all is capped", func(t *testing.T) {
		plan, err := p.plan(due("fire_all", 60*time.Second), base)
		require.NoError(t, err)
		fires, catchUps, skipped := count(plan)
		require.Equal(t, 10, catchUps)
		require.Equal(t, 61, fires+skipped)
	})
	t.Run("skip fires only on-time ticks", func(t *testing.T) {
		plan, err := p.plan(due("skip", 60*time.Second), base)
		require.NoError(t, err)
		fires, catchUps, skipped := count(plan)
		require.Equal(t, 0, catchUps)
		require.Equal(t, 55, skipped)
		require.Equal(t, 6, fires)
	})
	t.Run("outside the window nothing catches up", func(t *testing.T) {
		d := due("fire_all", 60*time.Second)
		d.MisfireWindowSeconds = 30
		plan, err := p.plan(d, base)
		require.NoError(t, err)
		_, catchUps, skipped := count(plan)
		require.Equal(t, 10, catchUps, "ticks 30s..6s old still catch up")
		require.Equal(t, 61-10-6, skipped)
		require.Contains(t, plan.skips[0].Detail, "catch-up window")
		require.Equal(t, 30, plan.skips[0].TickCount, "ticks 60s..31s old")
	})
	t.Run("a huge outage is one uncounted range", func(t *testing.T) {
		plan, err := p.plan(due("fire_once", 48*time.Hour), base)
		require.NoError(t, err)
		fires, catchUps, _ := count(plan)
		require.Equal(t, 1, catchUps, "one catch-up for the missed ticks inside the window")
		require.Equal(t, base.Add(-time.Hour), plan.fires[0].scheduledFor, "the oldest missed tick in the window stands for all")
		require.Equal(t, 7, fires)
		old := plan.skips[0]
		require.Equal(t, 0, old.TickCount, "47 hours of ticks: not counted")
		require.Equal(t, base.Add(-48*time.Hour), old.FirstTick)
		require.Equal(t, base.Add(-time.Hour), old.LastTick)
		require.Equal(t, base.Add(time.Second), *plan.next)
	})
	t.Run("forbid skips while the previous run is unfinished", func(t *testing.T) {
		d := due("fire_once", 0)
		d.ConcurrencyPolicy, d.HasUnfinished = "forbid", true
		plan, err := p.plan(d, base)
		require.NoError(t, err)
		require.Empty(t, plan.fires)
		require.Equal(t, axtype.SkipOverlap, plan.skips[0].Reason)
		require.Equal(t, 1, plan.skips[0].TickCount)
	})
	t.Run("forbid runs only the first of several fires", func(t *testing.T) {
		d := due("fire_all", 3*time.Second)
		d.ConcurrencyPolicy = "forbid"
		plan, err := p.plan(d, base)
		require.NoError(t, err)
		require.Len(t, plan.fires, 1)
		require.Equal(t, base.Add(-3*time.Second), plan.fires[0].scheduledFor)
		require.Equal(t, 3, plan.skips[0].TickCount)
	})
	t.Run("replace runs only the last of several fires", func(t *testing.T) {
		d := due("fire_all", 3*time.Second)
		d.ConcurrencyPolicy = "replace"
		plan, err := p.plan(d, base)
		require.NoError(t, err)
		require.Equal(t, []plannedFire{{scheduledFor: base}}, plan.fires)
		require.Equal(t, 3, plan.skips[0].TickCount)
	})
	t.Run("queue runs one, queues one and skips the rest as full", func(t *testing.T) {
		for _, c := range []struct {
			name                string
			unfinished, waiting bool
			fires               []plannedFire
			skipped             int
		}{
			{"nothing unfinished", false, false,
				[]plannedFire{{scheduledFor: base.Add(-3 * time.Second)}, {scheduledFor: base.Add(-2 * time.Second), wait: true}}, 2},
			{"a run unfinished", true, false, []plannedFire{{scheduledFor: base.Add(-3 * time.Second), wait: true}}, 3},
			{"a run unfinished and one waiting", true, true, []plannedFire{}, 4},
		} {
			d := due("fire_all", 3*time.Second)
			d.ConcurrencyPolicy, d.HasUnfinished, d.HasWaiting = "queue", c.unfinished, c.waiting
			plan, err := p.plan(d, base)
			require.NoError(t, err, c.name)
			require.Equal(t, c.fires, plan.fires, c.name)
			require.Len(t, plan.skips, 1, c.name)
			require.Equal(t, axtype.SkipOverlapQueueFull, plan.skips[0].Reason, c.name)
			require.Equal(t, c.skipped, plan.skips[0].TickCount, c.name)
		}
	})
}

// TestSharedTicksAreEachJobsOwn: the ticks a pass takes from a schedule's
// shared list are those computed for the job alone, whether its next fire
// has passed, is ahead on the schedule, or is off it, and however the
// per-job cap cuts them.
func TestSharedTicksAreEachJobsOwn(t *testing.T) {
	now := time.Date(2026, 3, 29, 0, 30, 2, 500_000_000, time.UTC) // a DST change in Europe/Berlin at 01:00 UTC
	until := now.Add(time.Hour + 30*time.Second)
	shared := sharedTicks{}
	for _, expr := range []string{"* * * * * *", "*/7 * * * * *", "0 */5 * * * *", "30 0 * * * *", "0 0 1 1 *"} {
		for _, tz := range []string{"UTC", "Europe/Berlin"} {
			for _, next := range []time.Time{{}, now.Add(-time.Minute), now.Add(10 * time.Minute).Truncate(time.Minute), now.Add(7 * time.Second).Truncate(time.Second), now.Add(1500 * time.Millisecond)} {
				for _, max := range []int{1, 100, 3600} {
					job := &axtype.DueTrigger{TriggerKind: axtype.TriggerCron, CronExpr: expr, Timezone: tz, NextFireAt: next}
					want, err := upcomingTicks(job, now, until, max)
					require.NoError(t, err)
					got, err := shared.ticks(job, now, until, max)
					require.NoError(t, err)
					require.Equal(t, want, got, "%s in %s, next %s, at most %d", expr, tz, next, max)
				}
			}
		}
	}
	require.Len(t, shared, 10, "one list per schedule")
}
