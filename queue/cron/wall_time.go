package cron

import (
	"time"

	"github.com/adhocore/gronx"
)

// Wall times are local clock readings carried in a UTC time.Time, so gronx
// can match them without knowing about zones: a wall time may be skipped or
// repeated by a transition, an instant never is.

// nextWall returns the first wall time strictly after ref that matches.
func (e expression) nextWall(ref time.Time) (time.Time, bool) {
	if e.everyDay {
		// Every date matches: the first allowed time of day after ref is
		// the answer, and gronx would parse the expression a few times
		// over to find it.
		return e.skipClock(ref).Add(time.Second), true
	}
	if e.lastDayForms {
		return e.nextWallByDay(ref)
	}
	w, err := gronx.NextTickAfter(e.gronx, e.skipClock(ref), false)
	// gronx gives up after many iterations and may then return ref itself.
	if err != nil || !w.After(ref) {
		return time.Time{}, false
	}
	return w, true
}

// firstWallIn returns the first matching wall time in (from, to], a span
// of hours: it tries the first allowed time of day on each day of the span,
// where an open-ended gronx search could run for years.
func (e expression) firstWallIn(from, to time.Time) (time.Time, bool) {
	lo := from.Add(time.Second)
	for day := startOfDay(lo); !day.After(to); day = day.AddDate(0, 0, 1) {
		h, m, sec := lo.Clock()
		if d, ok := e.nextClock(h, m, sec); ok {
			at := day.Add(d)
			if at.After(to) {
				break
			}
			if e.everyDay {
				return at, true
			}
			if e.dateOf(at) {
				return at, true
			}
		}
		lo = day.AddDate(0, 0, 1)
	}
	return time.Time{}, false
}

// dateOf reports whether the date of wall time at matches the date fields.
func (e expression) dateOf(at time.Time) bool {
	if e.lastDayForms {
		return e.dateDue(at)
	}
	due, err := gronx.New().IsDue(e.gronx, at)
	return err == nil && due
}

func startOfDay(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
}

// wallOf returns the local wall time of instant t.
func (s *Schedule) wallOf(t time.Time) time.Time { return WallTime(t, s.loc) }

// WallTime returns the wall time of instant t in loc: the local clock
// reading carried in a UTC time.Time, so arithmetic on it ignores zone
// transitions (a wall day is always 24 hours long).
func WallTime(t time.Time, loc *time.Location) time.Time {
	_, off := t.In(loc).Zone()
	return t.UTC().Add(time.Duration(off) * time.Second)
}

// nextOnTimeline fires at instants whose wall time matches. It walks zone
// periods (between two transitions), where wall time and instant differ by
// a constant offset, keeping w as the first match after ref: one gronx
// search usually serves every period up to the fire.
func (s *Schedule) nextOnTimeline(t, limit time.Time) time.Time {
	ref := s.wallOf(t)
	w, ok := s.expr.nextWall(ref)
	for ok && !w.After(limit) {
		_, off := t.In(s.loc).Zone()
		end := s.periodEnd(t)
		if next := w.Add(-time.Duration(off) * time.Second); end.IsZero() || next.Before(end) {
			return next
		}
		// Continue in the next period, from its first second inclusive.
		prev := ref
		t, ref = end, s.wallOf(end).Add(-time.Second)
		switch {
		case !w.After(ref): // w fell in a spring-forward gap
			w, ok = s.expr.nextWall(ref)
		case ref.Before(prev): // a fall-back repeats the wall times up to prev
			if m, found := s.expr.firstWallIn(ref, prev); found {
				w = m
			}
		}
	}
	return time.Time{}
}

// nextByWallTime fires once per matching wall time, at its first instant.
// That instant grows with the wall time, so the first wall time whose
// instant is after `after` is the answer.
func (s *Schedule) nextByWallTime(t, after, limit time.Time) time.Time {
	ref := s.wallRef(t)
	for {
		w, ok := s.expr.nextWall(ref)
		if !ok || w.After(limit) {
			return time.Time{}
		}
		if next := s.firstInstant(w); next.After(after) {
			return next
		}
		ref = w
	}
}

// periodEnd returns when the offset in effect at t may next change, or the
// zero time if never. Past a zone's transition table Go reports year ends
// as bounds too, but takes every year as 365 days: on December 31st of a
// leap year the reported end is at or before t. The offset cannot change
// before the real year end, the next UTC midnight, so step there.
func (s *Schedule) periodEnd(t time.Time) time.Time {
	_, end := t.In(s.loc).ZoneBounds()
	if !end.IsZero() && !end.After(t) {
		return t.Truncate(24 * time.Hour).Add(24 * time.Hour)
	}
	return end
}

// wallRef returns the latest wall time whose first instant is not after t.
// Inside the second pass of a repeated hour that is the end of the repeated
// span, not t's own wall time, which first occurred an hour ago.
func (s *Schedule) wallRef(t time.Time) time.Time {
	w := s.wallOf(t)
	local := t.In(s.loc)
	start, _ := local.ZoneBounds()
	if start.IsZero() {
		return w
	}
	_, prevOff := start.Add(-time.Second).In(s.loc).Zone()
	repeatedUntil := start.UTC().Add(time.Duration(prevOff)*time.Second - time.Second)
	if repeatedUntil.After(w) {
		return repeatedUntil
	}
	return w
}

// firstInstant maps wall time w to its first instant, or to the end of the
// spring-forward gap that skips it.
func (s *Schedule) firstInstant(w time.Time) time.Time { return FirstInstant(w, s.loc) }

// FirstInstant maps wall time w (see WallTime) in loc to the first instant
// the clock reads it: inside a spring-forward gap the gap's end, in a
// repeated hour its first occurrence, as fixed-hour cron fires. It never
// decreases as w grows.
func FirstInstant(w time.Time, loc *time.Location) time.Time {
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
	start, end := t.ZoneBounds()
	// In a gap Go resolves w with one of the two offsets; the resulting wall
	// time tells which side of the transition t landed on.
	switch got := WallTime(t, loc); {
	case got.After(w):
		return start
	case got.Before(w):
		return end
	}
	if !start.IsZero() {
		// After a fall-back, w may also have been reached before start.
		_, prevOff := start.Add(-time.Second).In(loc).Zone()
		if p := w.Add(-time.Duration(prevOff) * time.Second); p.Before(start) {
			return p
		}
	}
	return t
}
