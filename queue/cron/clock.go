package cron

import (
	"math/bits"
	"time"
)

// skipClock returns the second before the first time of day after ref that
// the second, minute and hour fields allow, on ref's date or the next. No
// time in between matches, so gronx can start there: it otherwise steps
// through seconds, minutes and hours one by one, parsing each field anew.
func (e expression) skipClock(ref time.Time) time.Time {
	day := startOfDay(ref)
	h, m, s := ref.Clock()
	if d, ok := e.nextClock(h, m, s+1); ok {
		return day.Add(d - time.Second)
	}
	d, _ := e.nextClock(0, 0, 0) // every field allows at least one value
	return day.AddDate(0, 0, 1).Add(d - time.Second)
}

// nextClock returns the first allowed time of day at or after h:m:s,
// carrying like an odometer; a unit that moves resets the smaller ones.
func (e expression) nextClock(h, m, s int) (time.Duration, bool) {
	hours, minutes, seconds := e.clock[2], e.clock[1], e.clock[0]
	for h < 24 {
		switch {
		case m >= 60:
			h, m, s = h+1, 0, 0
		case s >= 60:
			m, s = m+1, 0
		case !has(hours, h):
			h, m, s = nextBit(hours, h), 0, 0
		case !has(minutes, m):
			m, s = nextBit(minutes, m), 0
		case !has(seconds, s):
			s = nextBit(seconds, s)
		default:
			return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second, true
		}
	}
	return 0, false
}

func has(mask uint64, v int) bool { return mask&(1<<v) != 0 }

// nextBit returns the lowest set bit of mask at or above from, or 64.
func nextBit(mask uint64, from int) int {
	return bits.TrailingZeros64(mask >> from << from)
}
