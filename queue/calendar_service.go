package queue

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
)

// calendarInUseJobs is how many of the jobs naming a calendar a refused
// delete lists.
const calendarInUseJobs = 20

// CalendarService manages exclusion calendars. The trigger loops read a
// calendar at fire time (cached by version), so a change here reaches the
// jobs naming it on their next tick; it also wakes the upcoming-fires
// listing, whose hour may change.
type CalendarService struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
}

// NewCalendarService returns a CalendarService on pool; logger may be nil.
func NewCalendarService(pool *pgxpool.Pool, logger *slog.Logger) *CalendarService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &CalendarService{pool: pool, logger: logger}
}

// Create stores a calendar; axtype.ErrConflict when the name is taken.
func (s *CalendarService) Create(ctx context.Context, c *axtype.Calendar) (*axtype.Calendar, error) {
	return s.write(ctx, "calendar created", func(tx pgx.Tx) (*axtype.Calendar, error) { return db.CalendarInsert(ctx, tx, c) })
}

// Update replaces a calendar's definition; axtype.ErrNotFound when there
// is none of that name.
func (s *CalendarService) Update(ctx context.Context, c *axtype.Calendar) (*axtype.Calendar, error) {
	return s.write(ctx, "calendar updated", func(tx pgx.Tx) (*axtype.Calendar, error) { return db.CalendarUpdate(ctx, tx, c) })
}

func (s *CalendarService) write(ctx context.Context, msg string, f func(pgx.Tx) (*axtype.Calendar, error)) (*axtype.Calendar, error) {
	c, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (*axtype.Calendar, error) {
		c, err := f(tx)
		if err != nil {
			return nil, err
		}
		return c, db.Notify(ctx, tx, notify.JobChangedChannel, "")
	})
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, msg, "calendar", c.Name, "version", c.Version, "entries", len(c.Entries))
	return c, nil
}

// Get returns one calendar.
func (s *CalendarService) Get(ctx context.Context, name string) (*axtype.Calendar, error) {
	return db.CalendarGet(ctx, s.pool, name)
}

// GetMany returns the named calendars that exist.
func (s *CalendarService) GetMany(ctx context.Context, names []string) ([]*axtype.Calendar, error) {
	return db.CalendarListByNames(ctx, s.pool, names)
}

// List returns every calendar by name.
func (s *CalendarService) List(ctx context.Context) ([]*axtype.Calendar, error) {
	return db.CalendarList(ctx, s.pool)
}

// Delete removes a calendar. While jobs exclude it, it is refused with an
// *axtype.CalendarInUseError naming them.
func (s *CalendarService) Delete(ctx context.Context, name string) error {
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := db.CalendarDelete(ctx, tx, name, calendarInUseJobs); err != nil {
			return err
		}
		return db.Notify(ctx, tx, notify.JobChangedChannel, "")
	})
	if err != nil {
		return fmt.Errorf("error deleting calendar %q: %w", name, err)
	}
	s.logger.InfoContext(ctx, "calendar deleted", "calendar", name)
	return nil
}
