package schedule

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/cron"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// NextFire returns when job fires next strictly after `after`, or nil when
// it never fires on its own (manual jobs, delays already past, cron
// expressions with no further tick).
func NextFire(job *axtype.Job, after time.Time) (*time.Time, error) {
	w := activeWindow{from: job.ActiveFrom, until: job.ActiveUntil}
	if job.TriggerKind == axtype.TriggerDelay {
		if job.RunAt == nil || !job.RunAt.After(after) || !w.holds(*job.RunAt) {
			return nil, nil
		}
		runAt := job.RunAt.UTC()
		return &runAt, nil
	}
	if len(job.Triggers) > 0 {
		tick, _, err := listNext(job.Triggers, w, after)
		return tick, err
	}
	return w.next(job.TriggerKind, job.CronExpr, job.Timezone, job.IntervalSeconds, after)
}

// activeWindow is a job's active window [from, until); a nil end is open.
// No tick outside it fires: the trigger's first tick is its first one at
// or after from, and it has no next tick once one would reach until.
type activeWindow struct{ from, until *time.Time }

func dueWindow(t *axtype.DueTrigger) activeWindow {
	return activeWindow{from: t.ActiveFrom, until: t.ActiveUntil}
}

// holds reports whether tick lies in the window.
func (w activeWindow) holds(tick time.Time) bool {
	return (w.from == nil || !tick.Before(*w.from)) && (w.until == nil || tick.Before(*w.until))
}

// next is nextTick kept inside the window. Before the window an interval
// starts at from itself: the window anchors its grid, as a job created at
// from would.
func (w activeWindow) next(kind axtype.TriggerKind, expr, tz string, intervalSeconds int64, after time.Time) (*time.Time, error) {
	tick, err := nextTick(kind, expr, tz, intervalSeconds, after)
	if err != nil || tick == nil {
		return tick, err
	}
	if w.from != nil && tick.Before(*w.from) {
		if kind == axtype.TriggerInterval {
			from := w.from.UTC()
			tick = &from
		} else if tick, err = nextTick(kind, expr, tz, intervalSeconds, w.from.Add(-time.Nanosecond)); err != nil || tick == nil {
			return tick, err
		}
	}
	if !w.holds(*tick) {
		return nil, nil // past until
	}
	return tick, nil
}

// triggerTicks enumerates due triggers' ticks. Scheduled times are
// computed from the previous scheduled time, never from now, so interval
// jobs do not drift and cron jobs never skip or repeat a tick.
type triggerTicks struct{}

func (triggerTicks) next(t *axtype.DueTrigger, after time.Time) (*time.Time, error) {
	if t.TriggerKind == axtype.TriggerDelay {
		return nil, nil // a delay fires once
	}
	if len(t.Triggers) > 0 {
		tick, _, err := listNext(t.Triggers, dueWindow(t), after)
		return tick, err
	}
	return dueWindow(t).next(t.TriggerKind, t.CronExpr, t.Timezone, t.IntervalSeconds, after)
}

func (tt triggerTicks) atOrAfter(t *axtype.DueTrigger, x time.Time) (*time.Time, error) {
	switch {
	case !t.NextFireAt.Before(x):
		return &t.NextFireAt, nil
	case len(t.Triggers) > 0: // a list's intervals have fixed grids
		return tt.next(t, x.Add(-time.Nanosecond))
	case t.TriggerKind == axtype.TriggerInterval:
		step := time.Duration(t.IntervalSeconds) * time.Second
		n := (x.Sub(t.NextFireAt) + step - 1) / step
		tick := t.NextFireAt.Add(n * step)
		if !dueWindow(t).holds(tick) {
			return nil, nil // the grid has left the window: past until
		}
		return &tick, nil
	}
	return tt.next(t, x.Add(-time.Nanosecond))
}

func nextTick(kind axtype.TriggerKind, expr, tz string, intervalSeconds int64, after time.Time) (*time.Time, error) {
	switch kind {
	case axtype.TriggerCron:
		sched, err := schedules.get(expr, tz)
		if err != nil {
			return nil, err
		}
		return nonZero(sched.Next(after)), nil
	case axtype.TriggerInterval:
		next := after.Add(time.Duration(intervalSeconds) * time.Second).UTC()
		return &next, nil
	case axtype.TriggerManual, axtype.TriggerDelay, axtype.TriggerAfter:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown trigger kind %q", kind)
}

func nonZero(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// schedules caches parsed cron expressions: a replica fires the same few
// thousand expressions over and over.
var schedules = &scheduleCache{m: map[string]*cron.Schedule{}}

const scheduleCacheMax = 100_000

type scheduleCache struct {
	mu sync.Mutex
	m  map[string]*cron.Schedule
}

func (c *scheduleCache) get(expr, tz string) (*cron.Schedule, error) {
	key := expr + "\x00" + tz
	c.mu.Lock()
	s, ok := c.m[key]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := cron.Parse(expr, tz)
	if err != nil {
		return nil, fmt.Errorf("error parsing cron %q in %s: %w", expr, tz, err)
	}
	c.mu.Lock()
	if len(c.m) >= scheduleCacheMax {
		clear(c.m) // rare; a full rebuild is cheaper than tracking recency
	}
	c.m[key] = s
	c.mu.Unlock()
	return s, nil
}

// SameSchedule reports whether two versions of a job fire at the same
// times, so an update that leaves the schedule alone keeps next_fire_at.
func SameSchedule(a, b *axtype.Job) bool {
	return a.TriggerKind == b.TriggerKind && a.CronExpr == b.CronExpr &&
		a.Timezone == b.Timezone && a.IntervalSeconds == b.IntervalSeconds &&
		slices.Equal(a.Triggers, b.Triggers) &&
		timesEqual(a.RunAt, b.RunAt) && timesEqual(a.ActiveFrom, b.ActiveFrom) && timesEqual(a.ActiveUntil, b.ActiveUntil)
}

func timesEqual(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// Resume unpauses a job. Ticks that fell due while it was paused (those
// the trigger loop has not recorded yet as they passed) are recorded as
// skipped (reason paused) and the schedule moves on to the first tick
// after now: a resumed job does not replay its pause. Its
// delayed runs held while it was paused become due again.
func Resume(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	job, err := db.JobGetByIDForUpdate(ctx, tx, id)
	if err != nil || !job.Paused {
		return err
	}
	now, err := db.Now(ctx, tx)
	if err != nil {
		return err
	}
	if job.NextFireAt != nil && !job.NextFireAt.After(now) {
		due := &axtype.DueTrigger{JobID: job.ID, TriggerKind: job.TriggerKind, CronExpr: job.CronExpr,
			Timezone: job.Timezone, IntervalSeconds: job.IntervalSeconds, Triggers: job.Triggers, NextFireAt: *job.NextFireAt,
			ActiveFrom: job.ActiveFrom, ActiveUntil: job.ActiveUntil}
		skip := &skipRecorder{jobID: job.ID}
		p := &planner{ticks: triggerTicks{}}
		next, err := p.skipStretch(due, *job.NextFireAt, now.Add(time.Nanosecond), skip, axtype.SkipPaused, PausedDetail)
		if err != nil {
			return err
		}
		pausedAt := now
		if job.PausedAt != nil {
			pausedAt = *job.PausedAt
		}
		for _, s := range skip.done() {
			if err := db.SkippedFireRecordPaused(ctx, tx, s, pausedAt); err != nil {
				return err
			}
		}
		if _, err := db.TriggerSetNextFire(ctx, tx, id, next); err != nil {
			return err
		}
	}
	// Delayed runs that came due while it was paused fire now, under the
	// misfire policy: each is a business event, not a tick of a schedule.
	if _, err := db.DelayedRunRelease(ctx, tx, id); err != nil {
		return err
	}
	return db.TriggerResume(ctx, tx, id)
}
