package schedule

import (
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// maxTicksPerPlan bounds how many missed ticks one plan lists one by one;
// past it a stretch of an outage is recorded as one range.
const maxTicksPerPlan = 1000

// firePlan is what one due trigger does in a batch: the fires to record,
// the ticks to record as skipped, and where the trigger goes next.
type firePlan struct {
	fires []plannedFire
	skips []*axtype.SkippedFire
	next  *time.Time
}

type plannedFire struct {
	scheduledFor time.Time
	catchUp      bool // a missed tick fired late (misfire policy)
	wait         bool // it waits behind an unfinished run (policy queue)
}

// ticker enumerates a trigger's ticks.
type ticker interface {
	// next is the first tick strictly after `after`.
	next(t *axtype.DueTrigger, after time.Time) (*time.Time, error)
	// atOrAfter is the first tick at or after x, on the trigger's own grid
	// (interval ticks stay anchored to its next_fire_at).
	atOrAfter(t *axtype.DueTrigger, x time.Time) (*time.Time, error)
}

// planner decides fires for due triggers. It is pure: the clock and the
// ticker come in, so tests can drive it.
type planner struct {
	// misfireThreshold is how late a tick may fire and still count as on
	// time; later ticks are missed and follow the job's misfire policy.
	misfireThreshold time.Duration
	// fireAhead lets ticks up to this far in the future fire now: their
	// executions are committed early and their tasks wait for
	// scheduled_for (not_before), so a burst of simultaneous ticks is
	// runnable on time instead of queueing behind the inserts.
	fireAhead time.Duration
	ticks     ticker
}

// plan splits the ticks from t.NextFireAt to now (plus fireAhead) into
// three stretches: older than the catch-up window (skipped), missed within
// the window (the misfire policy decides), and on time (fired).
func (p *planner) plan(t *axtype.DueTrigger, now time.Time) (*firePlan, error) {
	plan := &firePlan{}
	skip := &skipRecorder{jobID: t.JobID}
	onTimeFrom := now.Add(-p.misfireThreshold)
	windowFrom := now.Add(-time.Duration(t.MisfireWindowSeconds) * time.Second)
	tick := &t.NextFireAt
	var err error
	if tick.Before(windowFrom) && windowFrom.Before(onTimeFrom) {
		if tick, err = p.skipStretch(t, *tick, windowFrom, skip, axtype.SkipMisfire, "missed by more than the catch-up window"); err != nil {
			return nil, err
		}
	}
	var missed []time.Time
	for tick != nil && tick.Before(onTimeFrom) {
		if len(missed) == maxTicksPerPlan {
			if tick, err = p.skipStretch(t, *tick, onTimeFrom, skip, axtype.SkipMisfire, fmt.Sprintf(
				"more than %d ticks missed in the catch-up window; the later ones were skipped", maxTicksPerPlan)); err != nil {
				return nil, err
			}
			break
		}
		missed = append(missed, *tick)
		if tick, err = p.ticks.next(t, *tick); err != nil {
			return nil, err
		}
	}
	// A tick on a date a calendar excludes is neither caught up nor fired.
	planMissed(t, excludeTicks(t, missed, skip), plan, skip)
	var onTime []time.Time
	for horizon := now.Add(p.fireAhead); tick != nil && !tick.After(horizon); {
		onTime = append(onTime, *tick)
		if tick, err = p.ticks.next(t, *tick); err != nil {
			return nil, err
		}
	}
	for _, at := range excludeTicks(t, onTime, skip) {
		plan.fires = append(plan.fires, plannedFire{scheduledFor: at})
	}
	plan.next = tick
	applyOverlap(t, plan, skip)
	plan.skips = skip.done()
	return plan, nil
}

// skipStretch records the ticks from first up to (not including) until
// as one skipped range and returns the first tick at or after until. The
// ticks are counted when there are few enough to list.
func (p *planner) skipStretch(t *axtype.DueTrigger, first, until time.Time, skip *skipRecorder, reason axtype.SkipReason, detail string) (*time.Time, error) {
	count, last := 0, first
	for tick := &first; tick != nil && tick.Before(until); {
		if count == maxTicksPerPlan {
			count, last = 0, until // too many to count: the range ends at until
			break
		}
		count, last = count+1, *tick
		var err error
		if tick, err = p.ticks.next(t, *tick); err != nil {
			return nil, err
		}
	}
	skip.addRange(reason, first, last, count, detail)
	return p.ticks.atOrAfter(t, until)
}

// planMissed applies the misfire policy to missed ticks (oldest first).
// fire_once fires the oldest missed tick, which stands for all of them.
func planMissed(t *axtype.DueTrigger, missed []time.Time, plan *firePlan, skip *skipRecorder) {
	for i, tick := range missed {
		switch {
		case t.MisfirePolicy == axtype.MisfireSkip:
			skip.add(axtype.SkipMisfire, tick, "missed; the misfire policy is skip")
		case t.MisfirePolicy == axtype.MisfireFireAll && i < t.MisfireMaxFires,
			t.MisfirePolicy != axtype.MisfireFireAll && i == 0:
			plan.fires = append(plan.fires, plannedFire{scheduledFor: tick, catchUp: true})
		case t.MisfirePolicy == axtype.MisfireFireAll:
			skip.add(axtype.SkipMisfire, tick, fmt.Sprintf("beyond the catch-up cap of %d fires", t.MisfireMaxFires))
		default:
			skip.add(axtype.SkipMisfire, tick, "missed; folded into one catch-up fire")
		}
	}
}

// applyOverlap enforces the concurrency policy within a batch. forbid:
// while an execution is unfinished no new one starts, and of several fires
// in one batch only the first runs. replace: of several fires only the
// last runs (each would replace the one before at once).
func applyOverlap(t *axtype.DueTrigger, plan *firePlan, skip *skipRecorder) {
	if t.ConcurrencyPolicy == axtype.ConcurrencyQueue {
		applyQueue(t, plan, skip)
		return
	}
	if len(plan.fires) < 2 && (t.ConcurrencyPolicy != axtype.ConcurrencyForbid || len(plan.fires) == 0) {
		return
	}
	switch t.ConcurrencyPolicy {
	case axtype.ConcurrencyReplace:
		last := len(plan.fires) - 1
		for _, f := range plan.fires[:last] {
			skip.add(axtype.SkipOverlap, f.scheduledFor, "replaced by a later tick fired in the same batch")
		}
		plan.fires = plan.fires[last:]
		return
	case axtype.ConcurrencyAllow:
		return
	}
	keep := 1
	if t.HasUnfinished {
		keep = 0
	}
	for _, f := range plan.fires[keep:] {
		skip.add(axtype.SkipOverlap, f.scheduledFor, "the previous execution was still unfinished")
	}
	plan.fires = plan.fires[:keep]
}

// applyQueue enforces concurrency policy queue: a fire while a run is
// unfinished waits behind it, at most one waits, and the fires after that
// are skipped as overlap_queue_full. With nothing unfinished the first
// fire of a batch runs and the second waits behind it.
func applyQueue(t *axtype.DueTrigger, plan *firePlan, skip *skipRecorder) {
	run, wait := 1, 1
	switch {
	case t.HasUnfinished && t.HasWaiting:
		run, wait = 0, 0
	case t.HasUnfinished:
		run = 0
	}
	keep := min(run+wait, len(plan.fires))
	for i := run; i < keep; i++ {
		plan.fires[i].wait = true
	}
	for _, f := range plan.fires[keep:] {
		skip.add(axtype.SkipOverlapQueueFull, f.scheduledFor, "a run of the job already waited behind the unfinished one")
	}
	plan.fires = plan.fires[:keep]
}

// skipRecorder merges consecutive skipped ticks with the same reason and
// detail into one range row.
type skipRecorder struct {
	jobID   uuid.UUID
	skips   []*axtype.SkippedFire
	pending *axtype.SkippedFire
}

func (s *skipRecorder) add(reason axtype.SkipReason, tick time.Time, detail string) {
	if p := s.pending; p != nil && p.Reason == reason && p.Detail == detail && p.TickCount > 0 {
		p.LastTick = tick
		p.TickCount++
		return
	}
	s.flush()
	s.pending = s.newSkip(reason, tick, tick, 1, detail)
}

func (s *skipRecorder) addRange(reason axtype.SkipReason, first, last time.Time, count int, detail string) {
	s.flush()
	s.skips = append(s.skips, s.newSkip(reason, first, last, count, detail))
}

func (s *skipRecorder) newSkip(reason axtype.SkipReason, first, last time.Time, count int, detail string) *axtype.SkippedFire {
	return &axtype.SkippedFire{JobID: s.jobID, Reason: reason, FirstTick: first, LastTick: last,
		TickCount: count, Detail: detail}
}

func (s *skipRecorder) flush() {
	if s.pending != nil {
		s.skips = append(s.skips, s.pending)
		s.pending = nil
	}
}

func (s *skipRecorder) done() []*axtype.SkippedFire {
	s.flush()
	return s.skips
}
