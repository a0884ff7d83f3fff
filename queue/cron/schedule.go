package cron

import (
	"time"
)

// Schedule is a validated cron expression bound to an IANA location. It is
// immutable and safe for concurrent use.
type Schedule struct {
	text string
	expr expression
	loc  *time.Location
}

// Parse validates expr in the package's dialect and tz, an IANA name where
// "" means UTC. Bad input yields a *FieldError naming "expr" or "timezone".
func Parse(expr, tz string) (*Schedule, error) {
	e, err := compile(expr)
	if err != nil {
		return nil, &FieldError{Field: "expr", Reason: err.Error()}
	}
	loc, err := loadLocation(tz)
	if err != nil {
		return nil, &FieldError{Field: "timezone", Reason: err.Error()}
	}
	return &Schedule{text: expr, expr: e, loc: loc}, nil
}

// Expr returns the expression as given to Parse.
func (s *Schedule) Expr() string { return s.text }

// Location returns the timezone the expression is evaluated in.
func (s *Schedule) Location() *time.Location { return s.loc }

// Next returns the first fire time strictly after `after`, in UTC, or the
// zero time when none falls within 50 years. Callers pass the previous
// scheduled time, so a late run does not shift the schedule.
func (s *Schedule) Next(after time.Time) time.Time {
	t := after.Truncate(time.Second)
	limit := s.wallOf(t).AddDate(horizonYears, 0, 0)
	var next time.Time
	if s.expr.timeline {
		next = s.nextOnTimeline(t, limit)
	} else {
		next = s.nextByWallTime(t, after, limit)
	}
	if next.IsZero() {
		return next
	}
	return next.UTC()
}

// NextN returns up to n successive fire times strictly after `after`, fewer
// when the schedule ends within the horizon.
func (s *Schedule) NextN(after time.Time, n int) []time.Time {
	out := make([]time.Time, 0, min(max(n, 0), 1024))
	for range n {
		after = s.Next(after)
		if after.IsZero() {
			break
		}
		out = append(out, after)
	}
	return out
}
