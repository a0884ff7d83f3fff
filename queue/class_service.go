package queue

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// ClassService manages rate classes for the API: their settings, and an
// operator's priority floor through dispatch.RateClasses, which owns what
// floors and tokens mean. The table's constraints check a class's
// settings (rate, burst, name, an automatic floor with a threshold); a
// class that breaks one gets a *axtype.ConstraintError.
type ClassService struct {
	pool    *pgxpool.Pool
	classes *dispatch.RateClasses
}

// NewClassService returns a ClassService on pool; logger may be nil.
func NewClassService(pool *pgxpool.Pool, logger *slog.Logger) *ClassService {
	return &ClassService{pool: pool, classes: dispatch.NewRateClasses(pool, logger)}
}

// Create stores a class with a full bucket and returns it with its live
// state; axtype.ErrConflict when the name is taken.
func (s *ClassService) Create(ctx context.Context, c *axtype.RateClass) (*axtype.RateClass, error) {
	written, err := db.RateClassInsert(ctx, s.pool, c)
	return s.reread(ctx, written, err)
}

// Update changes a class's settings (the bucket keeps its level, capped at
// the new burst) and returns it with its live state.
func (s *ClassService) Update(ctx context.Context, c *axtype.RateClass) (*axtype.RateClass, error) {
	written, err := db.RateClassUpdate(ctx, s.pool, c)
	if err == nil {
		s.classes.ReleaseHeld(ctx) // a floor lowered or lifted
	}
	return s.reread(ctx, written, err)
}

// Get returns a class with its bucket level and backlog now.
func (s *ClassService) Get(ctx context.Context, name string) (*axtype.RateClass, error) {
	return db.RateClassGet(ctx, s.pool, name)
}

// Groups returns the job groups class name is kept to (nil: any);
// axtype.ErrNotFound when there is no such class. It reads the class's
// row alone, not its backlog as Get does.
func (s *ClassService) Groups(ctx context.Context, name string) ([]string, error) {
	return db.RateClassGroups(ctx, s.pool, name)
}

// List returns every class with its bucket level and backlog now.
func (s *ClassService) List(ctx context.Context) ([]*axtype.RateClass, error) {
	return db.RateClassList(ctx, s.pool, "")
}

// Delete removes a class; while jobs name it the delete fails with a
// *axtype.ConstraintError.
func (s *ClassService) Delete(ctx context.Context, name string) error {
	if err := db.RateClassDelete(ctx, s.pool, name); err != nil {
		return err
	}
	s.classes.ReleaseHeld(ctx) // its floor is gone
	return nil
}

// Degrade switches an operator's floor on (see dispatch.RateClasses) and
// returns the class with its live state.
func (s *ClassService) Degrade(ctx context.Context, name string, minPriority int) (*axtype.RateClass, error) {
	written, err := s.classes.Degrade(ctx, name, minPriority)
	return s.reread(ctx, written, err)
}

// Restore switches an operator's floor off and returns the class with its
// live state.
func (s *ClassService) Restore(ctx context.Context, name string) (*axtype.RateClass, error) {
	written, err := s.classes.Restore(ctx, name)
	return s.reread(ctx, written, err)
}

// reread reads a class just written again, so the answer shows its
// bucket level and backlog, which a write does not return.
func (s *ClassService) reread(ctx context.Context, written *axtype.RateClass, err error) (*axtype.RateClass, error) {
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, written.Name)
}
