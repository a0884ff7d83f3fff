package queue

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// MaxNoticesShown bounds the notices a job's listing shows.
const MaxNoticesShown = 200

// NoticeService keeps jobs' failure-notice targets and shows their
// notices. The notices themselves are written by the database as runs end
// (migration 00058) and delivered by River (delivery.NoticeArgs).
type NoticeService struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
}

// NewNoticeService returns a NoticeService on pool.
func NewNoticeService(pool *pgxpool.Pool, logger *slog.Logger) *NoticeService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &NoticeService{pool: pool, logger: logger}
}

// Targets returns a job's targets with their URLs as stored (the caller
// redacts them); axtype.ErrNotFound when there is no such job.
func (s *NoticeService) Targets(ctx context.Context, jobID uuid.UUID) ([]axtype.NoticeTarget, error) {
	if _, err := db.JobGetByID(ctx, s.pool, jobID); err != nil {
		return nil, err
	}
	return db.NoticeTargetList(ctx, s.pool, jobID)
}

// SetTargets replaces a job's targets. A URL equal to a stored target's
// as shown (RedactURL, same kind) stands for that target's stored URL, so
// a list sent back as it was read keeps its credentials; a placeholder
// matching none is a *WriteOnlyError naming targets[i].url. Targets kept
// keep their open incident.
func (s *NoticeService) SetTargets(ctx context.Context, jobID uuid.UUID, targets []axtype.NoticeTarget) ([]axtype.NoticeTarget, error) {
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := db.JobGetByID(ctx, tx, jobID); err != nil {
			return err
		}
		stored, err := db.NoticeTargetList(ctx, tx, jobID)
		if err != nil {
			return err
		}
		for i := range targets {
			if err := restoreNoticeURL(&targets[i], i, stored); err != nil {
				return err
			}
		}
		return db.NoticeTargetsSet(ctx, tx, jobID, targets)
	})
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "job notice targets set", "job_id", jobID, "targets", len(targets))
	return db.NoticeTargetList(ctx, s.pool, jobID)
}

// restoreNoticeURL puts back the stored URL a redacted one stands for.
func restoreNoticeURL(t *axtype.NoticeTarget, i int, stored []axtype.NoticeTarget) error {
	if !strings.Contains(t.URL, Redacted) {
		return nil
	}
	for _, old := range stored {
		if old.Kind == t.Kind && RedactURL(old.URL) == t.URL {
			t.URL = old.URL
			return nil
		}
	}
	return &WriteOnlyError{Field: fmt.Sprintf("targets[%d].url", i), Value: t.URL}
}

// List returns a job's last max notices (at most MaxNoticesShown), newest
// first; axtype.ErrNotFound when there is no such job.
func (s *NoticeService) List(ctx context.Context, jobID uuid.UUID, max int) ([]axtype.Notice, error) {
	if _, err := db.JobGetByID(ctx, s.pool, jobID); err != nil {
		return nil, err
	}
	return db.NoticeList(ctx, s.pool, jobID, min(max, MaxNoticesShown))
}
