package queue

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// HistoryService shows the API the server's history retention and what
// maintenance removed (queue/history keeps it).
type HistoryService struct {
	pool *pgxpool.Pool
}

// NewHistoryService returns a HistoryService on pool.
func NewHistoryService(pool *pgxpool.Pool) *HistoryService {
	return &HistoryService{pool: pool}
}

// HistoryStatus is the retention in force and the latest drops.
type HistoryStatus struct {
	Setting *axtype.HistorySetting
	Drops   []axtype.HistoryDrop // newest first
}

// Status returns the stored settings and the latest maxDrops drops.
func (s *HistoryService) Status(ctx context.Context, maxDrops int) (*HistoryStatus, error) {
	setting, err := db.HistorySettingGet(ctx, s.pool)
	if err != nil {
		return nil, err
	}
	drops, err := db.HistoryDropList(ctx, s.pool, maxDrops)
	if err != nil {
		return nil, err
	}
	return &HistoryStatus{Setting: setting, Drops: drops}, nil
}
