package axtype

import (
	"fmt"
	"regexp"
	"time"
)

// Calendar bounds: a calendar lists at most MaxCalendarEntries entries and
// a job names at most MaxJobCalendars calendars (the table checks both).
const (
	MaxCalendarEntries = 1000
	MaxJobCalendars    = 16
)

// CalendarNamePattern is what a calendar's name must match (the table's
// calendar_name_format).
var CalendarNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Calendar is a named list of dates on which the ticks of the jobs that
// exclude it do not fire. Dates are read in Timezone, the calendar's own
// (not the job's): a holiday is a holiday where it is observed.
type Calendar struct {
	Name        string
	Description string
	Timezone    string
	Entries     []CalendarEntry
	// Version grows on every change; caches compare it.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// CalendarEntry is one form of: a single Date ("2026-12-25"), an
// inclusive range From..To, or a Yearly month-day ("12-25").
type CalendarEntry struct {
	Date   string `json:"date,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Yearly string `json:"yearly,omitempty"`
}

// Excludes returns the first entry that holds date ("2006-01-02", read in
// the calendar's timezone), or -1. ISO dates compare as strings.
func (c *Calendar) Excludes(date string) int {
	for i, e := range c.Entries {
		if e.holds(date) {
			return i
		}
	}
	return -1
}

func (e CalendarEntry) holds(date string) bool {
	switch {
	case e.Date != "":
		return e.Date == date
	case e.Yearly != "":
		return len(date) == 10 && e.Yearly == date[5:]
	}
	return e.From <= date && date <= e.To
}

// Check says what is wrong with e, naming the field ("" when it is
// valid): exactly one form, real dates, a range that does not end
// before it starts.
func (e CalendarEntry) Check() (field, problem string) {
	forms := 0
	for _, set := range []bool{e.Date != "", e.From != "" || e.To != "", e.Yearly != ""} {
		if set {
			forms++
		}
	}
	switch {
	case forms != 1:
		return "", "needs exactly one of date, from and to, or yearly"
	case e.Date != "":
		return checkDate("date", e.Date)
	case e.Yearly != "":
		if _, err := time.Parse("2006-01-02", "2024-"+e.Yearly); err != nil || len(e.Yearly) != 5 {
			return "yearly", fmt.Sprintf("%q is not a month-day MM-DD such as 12-25", e.Yearly)
		}
		return "", ""
	}
	if f, p := checkDate("from", e.From); p != "" {
		return f, p
	}
	if f, p := checkDate("to", e.To); p != "" {
		return f, p
	}
	if e.To < e.From {
		return "to", fmt.Sprintf("%s is before from (%s)", e.To, e.From)
	}
	return "", ""
}

func checkDate(field, s string) (string, string) {
	if _, err := time.Parse("2006-01-02", s); err != nil || len(s) != 10 {
		return field, fmt.Sprintf("%q is not a date YYYY-MM-DD such as 2026-12-25", s)
	}
	return "", ""
}

// CalendarInUseError refuses to delete a calendar that jobs name.
type CalendarInUseError struct {
	Name string
	Jobs []string // group/name, the first few
	More bool     // more jobs than Jobs lists
}

func (e *CalendarInUseError) Error() string {
	more := ""
	if e.More {
		more = " and more"
	}
	return fmt.Sprintf("calendar %s is excluded by jobs %v%s", e.Name, e.Jobs, more)
}
