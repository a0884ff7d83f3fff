package schedule

import (
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// A job with several triggers keeps one trigger row whose next_fire_at is
// the earliest next tick over all of them: its ticks are the merge of its
// triggers' ticks, so the trigger loop claims and plans it as any job, and
// two triggers ticking at one instant make one tick (one run). The run
// records the first trigger (in list order) that ticks at its time.

// unixEpoch anchors the grid of an interval in a list when the job has no
// active_from.
var unixEpoch = time.Unix(0, 0).UTC()

// listNext is the first tick strictly after `after` over specs, inside w,
// and the index of the first trigger ticking then (-1 with no tick).
func listNext(specs []axtype.TriggerSpec, w activeWindow, after time.Time) (*time.Time, int, error) {
	var best *time.Time
	index := -1
	for i, s := range specs {
		tick, err := specNext(s, w, after)
		if err != nil {
			return nil, -1, err
		}
		if tick != nil && (best == nil || tick.Before(*best)) {
			best, index = tick, i
		}
	}
	return best, index, nil
}

// specNext is one trigger of a list's first tick strictly after `after`,
// inside w. An interval ticks on its fixed grid (TriggerSpec).
func specNext(s axtype.TriggerSpec, w activeWindow, after time.Time) (*time.Time, error) {
	if s.Kind != axtype.TriggerInterval {
		return w.next(s.Kind, s.CronExpr, s.Timezone, s.IntervalSeconds, after)
	}
	if s.IntervalSeconds < 1 {
		return nil, nil
	}
	anchor := unixEpoch
	if w.from != nil {
		anchor = w.from.UTC()
	}
	step := time.Duration(s.IntervalSeconds) * time.Second
	tick := anchor
	if !after.Before(anchor) {
		tick = anchor.Add((after.Sub(anchor)/step + 1) * step)
	}
	if !w.holds(tick) {
		return nil, nil
	}
	return &tick, nil
}

// FiredBy returns the index of the first of job's triggers that ticks at
// tick: 0 for a job with one trigger, -1 when none of a list does.
func FiredBy(job *axtype.Job, tick time.Time) int {
	return firedBy(job.Triggers, activeWindow{from: job.ActiveFrom, until: job.ActiveUntil}, tick)
}

func firedBy(specs []axtype.TriggerSpec, w activeWindow, tick time.Time) int {
	if len(specs) == 0 {
		return 0
	}
	for _, i := range TicksAt(specs, w.from, w.until, tick) {
		return i
	}
	return -1
}

// TicksAt lists which of specs tick at at (indexes, in list order),
// ignoring a window of from and until, nil ends open.
func TicksAt(specs []axtype.TriggerSpec, from, until *time.Time, at time.Time) []int {
	w := activeWindow{from: from, until: until}
	var out []int
	for i, s := range specs {
		if tick, err := specNext(s, w, at.Add(-time.Nanosecond)); err == nil && tick != nil && tick.Equal(at) {
			out = append(out, i)
		}
	}
	return out
}

// ListNextTicks is each of specs' first tick strictly after `after`
// within the window of from and until (nil: none), for previews and
// explanations.
func ListNextTicks(specs []axtype.TriggerSpec, from, until *time.Time, after time.Time) []*time.Time {
	w := activeWindow{from: from, until: until}
	out := make([]*time.Time, len(specs))
	for i, s := range specs {
		out[i], _ = specNext(s, w, after)
	}
	return out
}

// ListFires lists the first n ticks of specs after `after` (merged: an
// instant two triggers share is listed once), each with the indexes of
// the triggers ticking then.
func ListFires(specs []axtype.TriggerSpec, after time.Time, n int) ([]time.Time, [][]int, error) {
	var ticks []time.Time
	var by [][]int
	for len(ticks) < n {
		tick, _, err := listNext(specs, activeWindow{}, after)
		if err != nil || tick == nil {
			return ticks, by, err
		}
		ticks = append(ticks, *tick)
		by = append(by, TicksAt(specs, nil, nil, *tick))
		after = *tick
	}
	return ticks, by, nil
}
