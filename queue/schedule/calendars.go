package schedule

import (
	"context"
	"sync"
	"time"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/cron"
)

// calendarCache holds the calendars the trigger loop has read, by name.
// A batch with jobs that exclude dates asks the database once which of
// their calendars changed (by version) and reads only those again, so an
// edited calendar reaches every job on its next tick and a batch of jobs
// without exclude asks nothing.
type calendarCache struct {
	mu sync.Mutex
	m  map[string]*axtype.Calendar
}

// calendarCacheMax bounds the cache; past it, it starts over.
const calendarCacheMax = 10_000

// resolve sets the Calendars of every due trigger that excludes dates.
func (c *calendarCache) resolve(ctx context.Context, e db.Executor, due []*axtype.DueTrigger) error {
	var names []string
	seen := map[string]bool{}
	for _, t := range due {
		for _, n := range t.Exclude {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	if len(names) == 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) > calendarCacheMax {
		c.m = map[string]*axtype.Calendar{}
	}
	versions := make([]int64, len(names))
	for i, n := range names {
		if cal := c.m[n]; cal != nil {
			versions[i] = cal.Version
		}
	}
	changed, err := db.CalendarListChanged(ctx, e, names, versions)
	if err != nil {
		return err
	}
	for _, cal := range changed {
		c.m[cal.Name] = cal
	}
	for _, t := range due {
		t.Calendars = t.Calendars[:0]
		for _, n := range t.Exclude {
			// A name missing here was deleted after the claim read the job;
			// the foreign key makes that impossible, so it is skipped.
			if cal := c.m[n]; cal != nil {
				t.Calendars = append(t.Calendars, cal)
			}
		}
	}
	return nil
}

// ExcludedBy returns the first of calendars whose dates hold tick (read in
// each calendar's timezone), or nil.
func ExcludedBy(calendars []*axtype.Calendar, tick time.Time) *axtype.Calendar {
	for _, cal := range calendars {
		loc, err := cron.LoadLocation(cal.Timezone)
		if err != nil {
			loc = time.UTC // the API refuses such a zone; an old row reads as UTC
		}
		if cal.Excludes(tick.In(loc).Format(time.DateOnly)) >= 0 {
			return cal
		}
	}
	return nil
}

// CalendarDetail is the detail of the skip records of ticks a calendar
// excluded: it names the calendar.
func CalendarDetail(name string) string { return "excluded by calendar " + name }

// excludeTicks drops from ticks those a calendar of t excludes, recording
// each as skipped (reason calendar).
func excludeTicks(t *axtype.DueTrigger, ticks []time.Time, skip *skipRecorder) []time.Time {
	if len(t.Calendars) == 0 {
		return ticks
	}
	kept := ticks[:0]
	for _, tick := range ticks {
		if cal := ExcludedBy(t.Calendars, tick); cal != nil {
			skip.add(axtype.SkipCalendar, tick, CalendarDetail(cal.Name))
			continue
		}
		kept = append(kept, tick)
	}
	return kept
}
