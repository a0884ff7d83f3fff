package queue

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// ErrBackfillFuture means a backfill's range reaches past now: a backfill
// fills in past ticks; the trigger fires the coming ones.
var ErrBackfillFuture = errors.New("to is after now: a backfill fills in past ticks, the schedule fires the coming ones")

// BackfillService creates, reads and cancels backfills; a
// schedule.BackfillReleaser on every replica releases their runs.
type BackfillService struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
	outbox *delivery.Outbox // told of cancelled runs; nil: none
}

// NewBackfillService returns a BackfillService on pool.
func NewBackfillService(pool *pgxpool.Pool, logger *slog.Logger, outbox *delivery.Outbox) *BackfillService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &BackfillService{pool: pool, logger: logger, outbox: outbox}
}

// BackfillRequest asks for runs of a job's past ticks.
type BackfillRequest struct {
	JobID         uuid.UUID
	From, To      time.Time // ticks in [From, To), To not after now
	MaxConcurrent int       // at most this many of its runs unfinished; 0: 1
	Overlap       axtype.BackfillOverlap
	// RequestKey makes the backfill once per (job, key): a retried call
	// gets the first. "": no key.
	RequestKey string
}

// Create stores a backfill of req's range; the releasers start it at once.
// Every tick of the job's cron trigger in [From, To), in its timezone and
// daylight-saving rules, that has no run by then gets one.
func (s *BackfillService) Create(ctx context.Context, req *BackfillRequest) (*axtype.Backfill, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, err
	}
	b, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (*axtype.Backfill, error) {
		job, err := db.JobGetByID(ctx, tx, req.JobID)
		if err != nil {
			return nil, err
		}
		// A job with several triggers is not backfilled (yet): its first
		// cron alone would fill in the wrong ticks.
		if job.TriggerKind != axtype.TriggerCron || len(job.Triggers) > 0 {
			return nil, schedule.ErrBackfillNotCron
		}
		now, err := db.Now(ctx, tx)
		if err != nil {
			return nil, err
		}
		if req.To.After(now) {
			return nil, ErrBackfillFuture
		}
		first, total, err := schedule.BackfillTicks(job.CronExpr, job.Timezone, req.From, req.To)
		if err != nil {
			return nil, err
		}
		stored, err := db.BackfillInsert(ctx, tx, &db.NewBackfill{ID: id, JobID: job.ID, From: req.From, To: req.To,
			MaxConcurrent: max(req.MaxConcurrent, 1), Overlap: cmpOverlap(req.Overlap), FirstTick: first,
			TicksTotal: total, RequestKey: req.RequestKey})
		if err != nil {
			return nil, err
		}
		id = stored
		if err := db.Notify(ctx, tx, notify.BackfillChannel, ""); err != nil {
			return nil, err
		}
		return db.BackfillGet(ctx, tx, stored)
	})
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "backfill created", "backfill_id", b.ID, "job_id", b.JobID, "ticks", b.TicksTotal,
		"from", b.From, "to", b.To, "max_concurrent", b.MaxConcurrent)
	return b, nil
}

func cmpOverlap(o axtype.BackfillOverlap) axtype.BackfillOverlap {
	if o == "" {
		return axtype.BackfillOverlapAllow
	}
	return o
}

// Get returns a backfill with its progress.
func (s *BackfillService) Get(ctx context.Context, id uuid.UUID) (*axtype.Backfill, error) {
	return db.BackfillGet(ctx, s.pool, id)
}

// ListByJob returns a job's backfills, newest first.
func (s *BackfillService) ListByJob(ctx context.Context, jobID uuid.UUID, limit int) ([]*axtype.Backfill, error) {
	if _, err := db.JobGetByID(ctx, s.pool, jobID); err != nil {
		return nil, err
	}
	ids, err := db.BackfillListByJob(ctx, s.pool, jobID, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*axtype.Backfill, 0, len(ids))
	for _, id := range ids {
		b, err := db.BackfillGet(ctx, s.pool, id)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// Cancel stops a running backfill: no more of its ticks are released and
// its unfinished runs are cancelled. A backfill that ended is left as it
// is.
func (s *BackfillService) Cancel(ctx context.Context, id uuid.UUID) (*axtype.Backfill, error) {
	b, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (*axtype.Backfill, error) {
		if _, err := db.BackfillGet(ctx, tx, id); err != nil {
			return nil, err
		}
		runs, err := db.BackfillCancel(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		if len(runs) > 0 {
			if _, err := db.ExecutionCancel(ctx, tx, runs, nil, "its backfill was cancelled"); err != nil {
				return nil, err
			}
			if err := s.outbox.Cancelled(ctx, tx); err != nil {
				return nil, err
			}
		}
		return db.BackfillGet(ctx, tx, id)
	})
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "backfill cancelled", "backfill_id", id, "job_id", b.JobID)
	return b, nil
}

// Group returns the group of backfill id's job, for keys limited to groups.
func (s *BackfillService) Group(ctx context.Context, id uuid.UUID) (string, error) {
	b, err := db.BackfillGet(ctx, s.pool, id)
	if err != nil {
		return "", err
	}
	job, err := db.JobGetByID(ctx, s.pool, b.JobID)
	if err != nil {
		return "", err
	}
	return job.Group, nil
}
