package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
)

var (
	// ErrIdempotencyMismatch means an Idempotency-Key was reused with a
	// different request.
	ErrIdempotencyMismatch = errors.New("idempotency key reused with a different request")
	// ErrOverlapForbidden means a job with concurrency policy forbid still
	// has an unfinished execution.
	ErrOverlapForbidden = errors.New("the job's previous execution is unfinished and its concurrency policy is forbid")
	// ErrOverlapQueueFull means a job with concurrency policy queue has an
	// unfinished execution and another one waiting behind it already.
	ErrOverlapQueueFull = errors.New("the job's previous execution is unfinished and a run already waits behind it " +
		"(concurrency policy queue, skip reason overlap_queue_full)")
)

// ExecutionService triggers, reads and cancels executions.
type ExecutionService struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	metrics *metrics.Metrics
	router  *dispatch.TaskRouter
	outbox  *delivery.Outbox // enqueues callbacks and agentless HTTP tasks; nil: none
	// notifier wakes this replica's lease polls after a fire while
	// notifications are lost (polling behind a pooler); nil: none.
	notifier *notify.Notifier
	turns    jobTurns // one manual fire of a job at a time reaches the database
}

// WithRouter makes the service place new tasks with router; it returns s.
func (s *ExecutionService) WithRouter(router *dispatch.TaskRouter) *ExecutionService {
	s.router = router
	return s
}

// NewExecutionService returns an ExecutionService on pool.
func NewExecutionService(pool *pgxpool.Pool, logger *slog.Logger, m *metrics.Metrics) *ExecutionService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = metrics.New(nil)
	}
	return &ExecutionService{pool: pool, logger: logger, metrics: m}
}

// TriggerRequest asks for a run of a job now.
type TriggerRequest struct {
	JobID uuid.UUID
	// Params overlay the job's params for this run (nil: the job's).
	Params json.RawMessage
	// Priority overrides the job's priority for this run.
	Priority *int
	// TraceParent is the caller's W3C trace context ("": a new trace).
	TraceParent string
	// Idempotency: with a Key, the same key (per API key) returns the same
	// execution; RequestHash tells a retry from a different request.
	APIKeyID       uuid.UUID
	IdempotencyKey string
	Method, Path   string
	RequestHash    []byte
}

// Trigger creates an execution of a job now, with its tasks, in one
// transaction with the idempotency record. replayed is true when the key
// had been used for the same request before.
func (s *ExecutionService) Trigger(ctx context.Context, req *TriggerRequest) (exec *axtype.Execution, replayed bool, err error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, false, fmt.Errorf("error generating execution id: %w", err)
	}
	release, err := s.turns.take(ctx, req.JobID)
	if err != nil {
		return nil, false, err
	}
	defer release()
	err = db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if req.IdempotencyKey != "" {
			prior, err := s.claimKey(ctx, tx, req, id)
			if err != nil || prior != uuid.Nil {
				if err == nil {
					exec, replayed = nil, true
					exec, err = db.ExecutionGetByID(ctx, tx, prior)
				}
				return err
			}
		}
		exec, err = s.fireNow(ctx, tx, req, id)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	if !replayed {
		s.notifier.AfterCommit(notify.TaskReadyChannel)
		s.metrics.Fires.WithLabelValues(string(axtype.CauseManual)).Inc()
		s.logger.InfoContext(ctx, "job triggered", "job_id", req.JobID, "execution_id", exec.ID)
	}
	return exec, replayed, nil
}

// claimKey records the key for this request, or returns the execution of
// the earlier request that used it.
func (s *ExecutionService) claimKey(ctx context.Context, tx pgx.Tx, req *TriggerRequest, id uuid.UUID) (uuid.UUID, error) {
	body, _ := json.Marshal(map[string]string{"execution_id": id.String()})
	prior, claimed, err := db.IdempotencyKeyClaim(ctx, tx, &axtype.IdempotencyRecord{
		APIKeyID: req.APIKeyID, Key: req.IdempotencyKey, Method: req.Method, Path: req.Path,
		RequestHash: req.RequestHash, ResponseStatus: 202, ResponseBody: body,
	})
	if err != nil || claimed {
		return uuid.Nil, err
	}
	if prior.Method != req.Method || prior.Path != req.Path || !bytes.Equal(prior.RequestHash, req.RequestHash) {
		return uuid.Nil, ErrIdempotencyMismatch
	}
	var stored struct {
		ExecutionID uuid.UUID `json:"execution_id"`
	}
	if err := json.Unmarshal(prior.ResponseBody, &stored); err != nil {
		return uuid.Nil, fmt.Errorf("error decoding stored idempotent response: %w", err)
	}
	return stored.ExecutionID, nil
}

func (s *ExecutionService) fireNow(ctx context.Context, tx pgx.Tx, req *TriggerRequest, id uuid.UUID) (*axtype.Execution, error) {
	job, err := db.JobGetByIDForUpdate(ctx, tx, req.JobID)
	if err != nil {
		return nil, err
	}
	if job.ConcurrencyPolicy != axtype.ConcurrencyAllow {
		unfinished, err := db.ExecutionHasUnfinished(ctx, tx, job.ID)
		if err != nil {
			return nil, err
		}
		if unfinished && job.ConcurrencyPolicy == axtype.ConcurrencyForbid {
			return nil, ErrOverlapForbidden
		}
		if unfinished && job.ConcurrencyPolicy == axtype.ConcurrencyReplace {
			if _, err := db.ExecutionCancel(ctx, tx, nil, []uuid.UUID{job.ID}, "replaced by a newer fire"); err != nil {
				return nil, err
			}
		}
	}
	now, err := db.Now(ctx, tx)
	if err != nil {
		return nil, err
	}
	var ready notify.Targets
	inserted, err := dispatch.InsertExecutions(ctx, tx, s.router, s.outbox, []*axtype.NewExecution{{
		ID: id, JobID: job.ID, Cause: axtype.CauseManual, ScheduledFor: now, Params: req.Params, Priority: req.Priority,
		TraceParent: req.TraceParent,
	}}, &ready)
	if err != nil {
		return nil, err
	}
	if len(inserted) != 1 {
		return nil, fmt.Errorf("error inserting execution %s: not inserted", id)
	}
	if err := holdIfUnfinished(ctx, tx, job, id); err != nil {
		return nil, err
	}
	if err := db.TriggerRecordFire(ctx, tx, job.ID, id, now); err != nil {
		return nil, err
	}
	if err := db.Notify(ctx, tx, notify.TaskReadyChannel, ready.Payload()); err != nil {
		return nil, err
	}
	return db.ExecutionGetByID(ctx, tx, id)
}

// holdIfUnfinished makes run execID, just inserted in tx, wait behind the
// unfinished run of job when its concurrency policy is queue; the caller
// holds job's row locked, so manual fires of one job queue one by one.
// ErrOverlapQueueFull: a run waits already (tx must be rolled back).
func holdIfUnfinished(ctx context.Context, tx pgx.Tx, job *axtype.Job, execID uuid.UUID) error {
	if job.ConcurrencyPolicy != axtype.ConcurrencyQueue {
		return nil
	}
	unfinished, err := db.ExecutionHasUnfinishedOther(ctx, tx, job.ID, execID)
	if err != nil || !unfinished {
		return err
	}
	held, err := db.QueuedRunHoldMany(ctx, tx, []uuid.UUID{execID}, []uuid.UUID{job.ID})
	if err != nil {
		return err
	}
	if !held[execID] {
		return ErrOverlapQueueFull
	}
	return nil
}

// Get returns an execution with its tasks, their results and errors from
// shard shardsFrom on (as many as a listing holds: db.TaskListByExecution).
func (s *ExecutionService) Get(ctx context.Context, id uuid.UUID, shardsFrom int) (*axtype.Execution, []*axtype.Task, error) {
	exec, err := s.Execution(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	tasks, err := db.TaskListByExecutionFrom(ctx, s.pool, id, shardsFrom)
	if err != nil {
		return nil, nil, err
	}
	return exec, tasks, nil
}

// Execution returns an execution without its tasks.
func (s *ExecutionService) Execution(ctx context.Context, id uuid.UUID) (*axtype.Execution, error) {
	exec, err := db.ExecutionGetByID(ctx, s.pool, id)
	if err != nil {
		return nil, s.gone(ctx, id, err)
	}
	return exec, nil
}

// Tasks returns the tasks of execution id, as Get does.
func (s *ExecutionService) Tasks(ctx context.Context, id uuid.UUID, shardsFrom int) ([]*axtype.Task, error) {
	return db.TaskListByExecutionFrom(ctx, s.pool, id, shardsFrom)
}

// gone turns err, a lookup of execution id, into one wrapping
// axtype.ErrRemoved when the execution is not found because history retention
// removed it.
func (s *ExecutionService) gone(ctx context.Context, id uuid.UUID, err error) error {
	if !errors.Is(err, axtype.ErrNotFound) {
		return err
	}
	removed, rerr := db.ExecutionRemoved(ctx, s.pool, id)
	if rerr != nil {
		return rerr
	}
	if removed {
		return fmt.Errorf("execution %s: %w", id, axtype.ErrRemoved)
	}
	return err
}

// Group returns the group of execution id's job, for checks of keys
// limited to some groups; an error wrapping axtype.ErrNotFound when there is
// no such execution.
func (s *ExecutionService) Group(ctx context.Context, id uuid.UUID) (string, error) {
	return db.ExecutionGroupByID(ctx, s.pool, id)
}

// List returns a page of executions, newest first. When filtering by a
// job that does not exist it returns axtype.ErrNotFound, not an empty page.
func (s *ExecutionService) List(ctx context.Context, p *db.ExecutionListParams) ([]*axtype.Execution, error) {
	execs, err := db.ExecutionList(ctx, s.pool, p)
	if err != nil || len(execs) > 0 || p.JobID == nil {
		return execs, err
	}
	if _, err := db.JobGetByID(ctx, s.pool, *p.JobID); err != nil {
		return nil, err
	}
	return execs, nil
}

// Cancel stops an execution: pending tasks end now, running ones are
// flagged for their agents. Cancelling a finished execution changes
// nothing.
func (s *ExecutionService) Cancel(ctx context.Context, id uuid.UUID, reason string) (*axtype.Execution, error) {
	exec, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (*axtype.Execution, error) {
		if _, err := db.ExecutionCancel(ctx, tx, []uuid.UUID{id}, nil, reason); err != nil {
			return nil, err
		}
		if err := s.outbox.Cancelled(ctx, tx); err != nil {
			return nil, err
		}
		return db.ExecutionGetByID(ctx, tx, id)
	})
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "execution cancel requested", "execution_id", id, "state", exec.State)
	return exec, nil
}

// SkippedFires returns the newest skipped ticks of a job.
func (s *ExecutionService) SkippedFires(ctx context.Context, jobID uuid.UUID, limit int) ([]*axtype.SkippedFire, error) {
	if _, err := db.JobGetByID(ctx, s.pool, jobID); err != nil {
		return nil, err
	}
	return db.SkippedFireListByJob(ctx, s.pool, jobID, limit)
}

// EventPageBytes bounds the messages of one page of events: output chunks
// are up to 1 MiB each, so a page of 1,000 could otherwise be a gigabyte.
const EventPageBytes = 4 << 20

// EventPage is a page of an execution's events.
type EventPage struct {
	Events []*axtype.TaskEvent
	// NextAfter is the id to pass as afterID for the next page (the last
	// event's, or afterID when the page is empty).
	NextAfter int64
	// More says the page stopped at its limit or its byte bound: more
	// events may follow at once.
	More bool
}

// Events returns a page of an execution's task events after afterID (kind
// "" for all): at most limit events and, past the first, no more than
// EventPageBytes of messages. It returns axtype.ErrNotFound when there is no
// such execution.
func (s *ExecutionService) Events(ctx context.Context, id uuid.UUID, afterID int64, kind axtype.TaskEventKind, limit int) (*EventPage, error) {
	events, err := db.TaskEventListByExecution(ctx, s.pool, &db.TaskEventListParams{
		ExecutionID: id, AfterID: afterID, Kind: kind, Limit: limit + 1, MaxBytes: EventPageBytes})
	if err != nil {
		return nil, err
	}
	page := &EventPage{NextAfter: afterID}
	var bytes int64
	for i, e := range events {
		bytes += int64(len(e.Message))
		if i == limit || (i > 0 && bytes > EventPageBytes) {
			page.More = true
			break
		}
		page.Events = append(page.Events, e)
		page.NextAfter = e.ID
	}
	if len(events) > 0 {
		return page, nil
	}
	if _, err := db.ExecutionGetByID(ctx, s.pool, id); err != nil {
		return nil, err
	}
	return page, nil
}

// WithOutbox makes the service enqueue callbacks and HTTP tasks of the
// executions it fires and cancels; it returns s.
func (s *ExecutionService) WithOutbox(o *delivery.Outbox) *ExecutionService {
	s.outbox = o
	return s
}

// WithNotifier makes the service wake this replica's lease polls after
// a manual fire while notifications are lost; it returns s.
func (s *ExecutionService) WithNotifier(n *notify.Notifier) *ExecutionService {
	s.notifier = n
	return s
}
