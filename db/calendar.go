package db

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// CalendarInsert stores a new calendar; axtype.ErrConflict when its name
// is taken.
func CalendarInsert(ctx context.Context, e Executor, c *axtype.Calendar) (*axtype.Calendar, error) {
	entries, err := json.Marshal(calendarEntries(c))
	if err != nil {
		return nil, fmt.Errorf("error encoding calendar entries: %w", err)
	}
	row, err := queries.CalendarInsert(ctx, e, dbsqlc.CalendarInsertParams{Name: c.Name, Description: c.Description,
		Timezone: c.Timezone, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("error inserting calendar %q: %w", c.Name, mapErr(err))
	}
	return calendarFromRow(row)
}

// CalendarUpdate replaces a calendar's definition and bumps its version.
func CalendarUpdate(ctx context.Context, e Executor, c *axtype.Calendar) (*axtype.Calendar, error) {
	entries, err := json.Marshal(calendarEntries(c))
	if err != nil {
		return nil, fmt.Errorf("error encoding calendar entries: %w", err)
	}
	row, err := queries.CalendarUpdate(ctx, e, dbsqlc.CalendarUpdateParams{Name: c.Name, Description: c.Description,
		Timezone: c.Timezone, Entries: entries})
	if err != nil {
		return nil, fmt.Errorf("error updating calendar %q: %w", c.Name, mapErr(err))
	}
	return calendarFromRow(row)
}

// CalendarGet returns one calendar.
func CalendarGet(ctx context.Context, e Executor, name string) (*axtype.Calendar, error) {
	row, err := queries.CalendarGet(ctx, e, name)
	if err != nil {
		return nil, fmt.Errorf("error getting calendar %q: %w", name, mapErr(err))
	}
	return calendarFromRow(row)
}

// CalendarList returns every calendar by name.
func CalendarList(ctx context.Context, e Executor) ([]*axtype.Calendar, error) {
	rows, err := queries.CalendarList(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error listing calendars: %w", mapErr(err))
	}
	return calendarsFromRows(rows)
}

// CalendarListByNames returns the named calendars that exist.
func CalendarListByNames(ctx context.Context, e Executor, names []string) ([]*axtype.Calendar, error) {
	if len(names) == 0 {
		return nil, nil
	}
	rows, err := queries.CalendarListByNames(ctx, e, names)
	if err != nil {
		return nil, fmt.Errorf("error reading calendars: %w", mapErr(err))
	}
	return calendarsFromRows(rows)
}

// CalendarListChanged returns the calendars of names whose version is
// not versions[i] (0: not known).
func CalendarListChanged(ctx context.Context, e Executor, names []string, versions []int64) ([]*axtype.Calendar, error) {
	rows, err := queries.CalendarListChanged(ctx, e, dbsqlc.CalendarListChangedParams{Names: names, Versions: versions})
	if err != nil {
		return nil, fmt.Errorf("error reading changed calendars: %w", mapErr(err))
	}
	return calendarsFromRows(rows)
}

// CalendarDelete removes a calendar unless jobs name it: then it returns
// an *axtype.CalendarInUseError naming the first of them. tx holds the
// calendar's row lock from the check to the delete, so a job naming it
// meanwhile waits and then fails its foreign key.
func CalendarDelete(ctx context.Context, tx pgx.Tx, name string, maxJobs int) error {
	if _, err := queries.CalendarGetForUpdate(ctx, tx, name); err != nil {
		return fmt.Errorf("error locking calendar %q: %w", name, mapErr(err))
	}
	jobs, err := queries.CalendarJobs(ctx, tx, dbsqlc.CalendarJobsParams{CalendarName: name, Max: int32(maxJobs + 1)})
	if err != nil {
		return fmt.Errorf("error listing the jobs of calendar %q: %w", name, mapErr(err))
	}
	if len(jobs) > 0 {
		inUse := &axtype.CalendarInUseError{Name: name, More: len(jobs) > maxJobs}
		for _, j := range jobs[:min(len(jobs), maxJobs)] {
			inUse.Jobs = append(inUse.Jobs, j.GroupName+"/"+j.Name)
		}
		return inUse
	}
	n, err := queries.CalendarDelete(ctx, tx, name)
	if err != nil {
		return fmt.Errorf("error deleting calendar %q: %w", name, mapErr(err))
	}
	if n == 0 {
		return axtype.ErrNotFound
	}
	return nil
}

// calendarEntries is c's entries, never null (the column holds an array).
func calendarEntries(c *axtype.Calendar) []axtype.CalendarEntry {
	if c.Entries == nil {
		return []axtype.CalendarEntry{}
	}
	return c.Entries
}

func calendarsFromRows(rows []dbsqlc.AxCalendar) ([]*axtype.Calendar, error) {
	out := make([]*axtype.Calendar, len(rows))
	for i, r := range rows {
		c, err := calendarFromRow(r)
		if err != nil {
			return nil, err
		}
		out[i] = c
	}
	return out, nil
}

func calendarFromRow(r dbsqlc.AxCalendar) (*axtype.Calendar, error) {
	c := &axtype.Calendar{Name: r.Name, Description: r.Description, Timezone: r.Timezone, Version: r.Version,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if err := json.Unmarshal(r.Entries, &c.Entries); err != nil {
		return nil, fmt.Errorf("error decoding the entries of calendar %q: %w", r.Name, err)
	}
	return c, nil
}
