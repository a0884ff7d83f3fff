package cron

import (
	"strconv"
	"strings"
	"time"

	"github.com/adhocore/gronx"
)

// hasLastDayForm reports whether a canonical day-of-month field holds one
// of Quartz's forms counted from the month's last day (LW, L-n, L-nW).
func hasLastDayForm(dom string) bool {
	for item := range strings.SplitSeq(dom, ",") {
		if isLastDayForm(item) {
			return true
		}
	}
	return false
}

func isLastDayForm(item string) bool { return item == "LW" || strings.HasPrefix(item, "L-") }

// nextWallByDay finds the first matching wall time after ref by trying each
// date in turn, skipping months the month field excludes. It serves the
// expressions gronx cannot match; a date costs a few field checks, so even
// the 50-year horizon is a few milliseconds.
func (e expression) nextWallByDay(ref time.Time) (time.Time, bool) {
	day := startOfDay(ref)
	h, m, s := ref.Clock()
	if d, ok := e.nextClock(h, m, s+1); ok && e.dateDue(day) {
		return day.Add(d), true
	}
	first, _ := e.nextClock(0, 0, 0) // every clock field allows a value
	limit := day.AddDate(horizonYears, 0, 0)
	var days dayVerdicts
	monthChecked := time.Time{} // the first of the month last found allowed
	for day = day.AddDate(0, 0, 1); !day.After(limit); {
		if month := time.Date(day.Year(), day.Month(), 1, 0, 0, 0, 0, time.UTC); !month.Equal(monthChecked) {
			if !e.monthDue(day) {
				day = month.AddDate(0, 1, 0)
				continue
			}
			monthChecked = month
		}
		if days.due(e, day) {
			return day.Add(first), true
		}
		day = day.AddDate(0, 0, 1)
	}
	return time.Time{}, false
}

// dayVerdicts remembers dayDue by all it depends on: the month's length,
// the weekday of its first day, and the day of the month (every form of
// the day-of-month and day-of-week fields, L, W, # included, is fixed by
// those; there are 28 shapes of month). The 50-year search of an
// expression that never fires tried each item of the fields on each of
// about 18,000 dates: 15 ms for a day-of-month list of 36 last-day forms,
// a cost any caller could ask for 16 times a job.
type dayVerdicts [4][7][32]uint8 // 0: not yet known, 1: no, 2: yes

func (v *dayVerdicts) due(e expression, day time.Time) bool {
	year, month, d := day.Date()
	firstWeekday := (int(day.Weekday()) - (d-1)%7 + 7) % 7
	known := &v[daysIn(year, month)-28][firstWeekday][d]
	if *known == 0 {
		*known = 1
		if e.dayDue(day) {
			*known = 2
		}
	}
	return *known == 2
}

// monthDue reports whether the month field allows day's month.
func (e expression) monthDue(day time.Time) bool {
	c := &gronx.SegmentChecker{}
	c.SetRef(day)
	due, err := c.CheckDue(e.mon, 4)
	return err == nil && due
}

// dateDue reports whether the date of day matches, combining day of month
// and day of week as gronx does (and the package doc says): either one
// when both are restricted, both when one is * or starts with *.
func (e expression) dateDue(day time.Time) bool {
	return e.monthDue(day) && e.dayDue(day)
}

// dayDue is dateDue for a date whose month the month field allows.
func (e expression) dayDue(day time.Time) bool {
	c := &gronx.SegmentChecker{}
	c.SetRef(day)
	domDue := e.dom == "*" || e.monthDayDue(c, day)
	if e.dow == "*" {
		return domDue
	}
	dowDue, err := c.CheckDue(e.dow, 5)
	dowDue = err == nil && dowDue
	if e.dom == "*" || strings.HasPrefix(e.dom, "*") || strings.HasPrefix(e.dow, "*/") {
		return domDue && dowDue
	}
	return domDue || dowDue
}

// monthDayDue checks each element of the day-of-month list, the last-day
// forms here and the others with gronx.
func (e expression) monthDayDue(c *gronx.SegmentChecker, day time.Time) bool {
	for item := range strings.SplitSeq(e.dom, ",") {
		if isLastDayForm(item) {
			if lastDayFormDay(item, day) == day.Day() {
				return true
			}
			continue
		}
		if due, err := c.CheckDue(item, 3); err == nil && due {
			return true
		}
	}
	return false
}

// lastDayFormDay returns the day of day's month that a canonical LW, L-n or
// L-nW names, or 0 when the month is too short for the offset (Quartz
// would roll into the previous month; ax never leaves the month, like nW).
func lastDayFormDay(item string, day time.Time) int {
	last := daysIn(day.Year(), day.Month())
	offset, weekday := strings.CutSuffix(strings.TrimPrefix(item, "L"), "W")
	n, _ := strconv.Atoi(strings.TrimPrefix(offset, "-")) // "" (LW) is 0
	target := last - n
	if target < 1 {
		return 0
	}
	if weekday {
		return nearestWeekday(day.Year(), day.Month(), target, last)
	}
	return target
}

// nearestWeekday returns the Monday-to-Friday day nearest to target within
// its month: a Saturday moves back to Friday unless it is the 1st (then on
// to Monday the 3rd), a Sunday moves on to Monday unless it is the last day
// (then back to Friday), as Quartz's W does.
func nearestWeekday(year int, month time.Month, target, last int) int {
	switch time.Date(year, month, target, 0, 0, 0, 0, time.UTC).Weekday() {
	case time.Saturday:
		if target == 1 {
			return 3
		}
		return target - 1
	case time.Sunday:
		if target == last {
			return target - 2
		}
		return target + 1
	}
	return target
}

func daysIn(year int, month time.Month) int {
	return time.Date(year, month+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
