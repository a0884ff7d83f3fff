package queue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// OverviewService aggregates what the console's home page draws.
type OverviewService struct {
	pool *pgxpool.Pool
}

// NewOverviewService returns an OverviewService on pool.
func NewOverviewService(pool *pgxpool.Pool) *OverviewService {
	return &OverviewService{pool: pool}
}

// Bounds of the overview: the busiest jobs drawn, the queue's rows.
const (
	OverviewJobs      = 8
	OverviewQueueRows = 60
	// OverviewWindow is how far back the runs and durations go.
	OverviewWindow = 24 * time.Hour
)

// Overview reads the window ending at now (nil: the database's now()) for
// a key limited to groups (nil: all).
func (s *OverviewService) Overview(ctx context.Context, groups []string, now *time.Time) (*axtype.Overview, error) {
	out, err := db.Overview(ctx, s.pool, db.OverviewParams{Now: now, Groups: groups, MaxJobs: OverviewJobs,
		MaxRows: OverviewQueueRows})
	if err != nil {
		return nil, err
	}
	end := time.Now()
	if now != nil {
		end = *now
	}
	out.Until, out.Since = end, end.Add(-OverviewWindow)
	return out, nil
}
