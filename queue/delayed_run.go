package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
)

// MaxRunDelay bounds how far ahead a delayed run may be set.
const MaxRunDelay = 400 * 24 * time.Hour

// MaxRunBatch bounds the runs of one batch call.
const MaxRunBatch = 1000

// runScheduledNotifyWithin: storing runs due sooner than this wakes the
// trigger loops (which otherwise sleep up to 5 s by default).
const runScheduledNotifyWithin = time.Minute

// runKeyLife is how long after its run_at a delayed run's Idempotency-Key
// lives: a retry, or a cancel by key, is answered until then.
const runKeyLife = 24 * time.Hour

// ScheduledRun is a delayed run as the API shows it: pending until it
// fires (then it is the execution with the same id), or cancelled.
type ScheduledRun = axtype.DelayedRun

// DelayedRunRequest is one run to schedule: a TriggerRequest (job, params,
// priority, trace, idempotency) and when.
type DelayedRunRequest struct {
	*TriggerRequest
	RunAt time.Time
}

// DelayedRunResult is what one scheduled run became.
type DelayedRunResult struct {
	ID       uuid.UUID
	JobID    uuid.UUID
	RunAt    time.Time
	Replayed bool // its Idempotency-Key had been used for the same request
}

// BatchItemError is a run of a batch that cannot be scheduled: nothing of
// the batch was.
type BatchItemError struct {
	Index int
	Field string // the item's field at fault: job_id or idempotency_key
	Err   error
}

func (e *BatchItemError) Error() string {
	return fmt.Sprintf("runs[%d].%s: %v", e.Index, e.Field, e.Err)
}

func (e *BatchItemError) Unwrap() error { return e.Err }

// Schedule stores one delayed run of a job (the trigger API with run_at):
// it fires at RunAt as the execution with the returned id. A run at or
// before now fires at once.
func (s *ExecutionService) Schedule(ctx context.Context, req *DelayedRunRequest) (*DelayedRunResult, error) {
	out, err := s.ScheduleBatch(ctx, []*DelayedRunRequest{req})
	if err != nil {
		var item *BatchItemError
		if errors.As(err, &item) {
			return nil, item.Err
		}
		return nil, err
	}
	return out[0], nil
}

// ScheduleBatch stores delayed runs in one transaction: all or none. Runs
// with an Idempotency-Key used before for the same request are not stored
// again (Replayed, with the first run's id); one used for another request
// fails the batch. Keys must be distinct within a batch, and all requests
// of one batch come from one API key.
func (s *ExecutionService) ScheduleBatch(ctx context.Context, reqs []*DelayedRunRequest) ([]*DelayedRunResult, error) {
	out := make([]*DelayedRunResult, len(reqs))
	var fresh []*axtype.DelayedRun
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		fresh = fresh[:0]
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		if err := s.checkJobs(ctx, tx, reqs); err != nil {
			return err
		}
		ids := make([]uuid.UUID, len(reqs))
		for i := range reqs {
			if ids[i], err = uuid.NewV7(); err != nil {
				return fmt.Errorf("error generating execution id: %w", err)
			}
		}
		prior, err := s.claimRunKeys(ctx, tx, reqs, ids)
		if err != nil {
			return err
		}
		soon := false
		for i, r := range reqs {
			if id, ok := prior[i]; ok {
				out[i] = &DelayedRunResult{ID: id, JobID: r.JobID, RunAt: r.RunAt, Replayed: true}
				continue
			}
			runAt := r.RunAt
			if runAt.Before(now) {
				runAt = now
			}
			soon = soon || runAt.Before(now.Add(runScheduledNotifyWithin))
			fresh = append(fresh, &axtype.DelayedRun{ID: ids[i], JobID: r.JobID, RunAt: runAt, Params: r.Params,
				Priority: r.Priority, TraceParent: r.TraceParent})
			out[i] = &DelayedRunResult{ID: ids[i], JobID: r.JobID, RunAt: runAt}
		}
		if err := db.DelayedRunInsertMany(ctx, tx, fresh); err != nil {
			return err
		}
		if soon {
			return db.Notify(ctx, tx, notify.RunScheduledChannel, "")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, r := range fresh {
		s.logger.DebugContext(ctx, "delayed run scheduled", "job_id", r.JobID, "execution_id", r.ID, "run_at", r.RunAt)
	}
	return out, nil
}

// checkJobs makes sure every job named exists, so an unknown one is named
// by its index rather than failing the insert.
func (s *ExecutionService) checkJobs(ctx context.Context, tx pgx.Tx, reqs []*DelayedRunRequest) error {
	first := map[uuid.UUID]int{}
	var ids []uuid.UUID
	for i, r := range reqs {
		if _, seen := first[r.JobID]; !seen {
			first[r.JobID] = i
			ids = append(ids, r.JobID)
		}
	}
	found, err := db.JobExisting(ctx, tx, ids)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if !found[id] {
			return &BatchItemError{Index: first[id], Field: "job_id", Err: fmt.Errorf("job %s: %w", id, axtype.ErrNotFound)}
		}
	}
	return nil
}

// claimRunKeys claims the runs' Idempotency-Keys and returns, by index,
// the id of the earlier run of each key used before for the same request.
func (s *ExecutionService) claimRunKeys(ctx context.Context, tx pgx.Tx, reqs []*DelayedRunRequest, ids []uuid.UUID) (map[int]uuid.UUID, error) {
	var claims []axtype.IdempotencyClaim
	index := map[string]int{}
	var apiKey uuid.UUID
	for i, r := range reqs {
		if r.IdempotencyKey == "" {
			continue
		}
		if j, dup := index[r.IdempotencyKey]; dup {
			return nil, &BatchItemError{Index: i, Field: "idempotency_key", Err: fmt.Errorf("repeats runs[%d]'s", j)}
		}
		index[r.IdempotencyKey], apiKey = i, r.APIKeyID
		body, _ := json.Marshal(map[string]string{"execution_id": ids[i].String()})
		claims = append(claims, axtype.IdempotencyClaim{Key: r.IdempotencyKey, Path: r.Path, RequestHash: r.RequestHash,
			ResponseBody: body, ExpiresAt: laterOf(r.RunAt, time.Now()).Add(runKeyLife)})
	}
	prior, err := db.IdempotencyKeyClaimMany(ctx, tx, apiKey, claims)
	if err != nil || len(prior) == 0 {
		return nil, err
	}
	out := make(map[int]uuid.UUID, len(prior))
	for _, c := range claims {
		rec, live := prior[c.Key]
		if !live {
			continue
		}
		i := index[c.Key]
		if rec.Method != "POST" || rec.Path != c.Path || !bytes.Equal(rec.RequestHash, c.RequestHash) {
			return nil, &BatchItemError{Index: i, Field: "idempotency_key", Err: ErrIdempotencyMismatch}
		}
		var stored struct {
			ExecutionID uuid.UUID `json:"execution_id"`
		}
		if err := json.Unmarshal(rec.ResponseBody, &stored); err != nil {
			return nil, fmt.Errorf("error decoding stored idempotent response: %w", err)
		}
		out[i] = stored.ExecutionID
	}
	return out, nil
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// RunCancelOutcome is what cancelling one delayed run did.
type RunCancelOutcome struct {
	Key   string
	ID    uuid.UUID // the run (zero when the key is unknown)
	State string    // cancelled, fired (too late: it is an execution now), not_found
}

// Run cancel outcomes.
const (
	RunCancelled = "cancelled"
	RunFired     = "fired"
	RunNotFound  = "not_found"
)

// CancelRunsByKey cancels the pending delayed runs created with keys by
// the API key apiKeyID ("the order was paid"): one statement of two
// primary-key lookups a key, whatever the number of runs waiting, and for
// a key it did not cancel, a look at why.
func (s *ExecutionService) CancelRunsByKey(ctx context.Context, apiKeyID uuid.UUID, keys []string, reason string) ([]RunCancelOutcome, error) {
	// The cancel commits on its own (one round trip, the common case); a
	// key it missed is looked at after, outside it: what that finds (fired,
	// cancelled before, unknown) does not change once true.
	cancelled, err := db.DelayedRunCancelByKeys(ctx, s.pool, apiKeyID, keys, reason)
	if err != nil {
		return nil, err
	}
	out := make([]RunCancelOutcome, len(keys))
	for i, key := range keys {
		out[i] = RunCancelOutcome{Key: key, ID: cancelled[key], State: RunCancelled}
		if _, ok := cancelled[key]; ok {
			continue
		}
		if out[i].ID, out[i].State, err = s.notPending(ctx, s.pool, apiKeyID, key); err != nil {
			return nil, err
		}
	}
	for _, o := range out {
		if o.State == RunCancelled {
			s.logger.InfoContext(ctx, "delayed run cancelled", "execution_id", o.ID, "by", "idempotency_key")
		}
	}
	return out, nil
}

// notPending says why key names no pending run: its run fired already,
// was cancelled before (both: its id), or the key is unknown.
func (s *ExecutionService) notPending(ctx context.Context, tx db.Executor, apiKeyID uuid.UUID, key string) (uuid.UUID, string, error) {
	prior, err := db.IdempotencyKeyLookup(ctx, tx, apiKeyID, key)
	if errors.Is(err, axtype.ErrNotFound) {
		return uuid.Nil, RunNotFound, nil
	}
	if err != nil {
		return uuid.Nil, "", err
	}
	var stored struct {
		ExecutionID uuid.UUID `json:"execution_id"`
	}
	if json.Unmarshal(prior.ResponseBody, &stored) != nil || stored.ExecutionID == uuid.Nil {
		return uuid.Nil, RunNotFound, nil
	}
	run, err := db.DelayedRunGet(ctx, tx, stored.ExecutionID)
	switch {
	case err == nil && run.CancelledAt != nil:
		return run.ID, RunCancelled, nil
	case err == nil:
		return run.ID, RunNotFound, nil // pending but locked by a fire in progress: it fires
	case !errors.Is(err, axtype.ErrNotFound):
		return uuid.Nil, "", err
	}
	if _, err := db.ExecutionGroupByID(ctx, tx, stored.ExecutionID); err != nil {
		if errors.Is(err, axtype.ErrNotFound) {
			return uuid.Nil, RunNotFound, nil
		}
		return uuid.Nil, "", err
	}
	return stored.ExecutionID, RunFired, nil
}

// CancelRun cancels a pending delayed run by its id; axtype.ErrNotFound when
// it is not a delayed run that has yet to fire (it may be an execution:
// cancel that instead).
func (s *ExecutionService) CancelRun(ctx context.Context, id uuid.UUID, reason string) (*ScheduledRun, error) {
	runs, err := db.DelayedRunCancelMany(ctx, s.pool, []uuid.UUID{id}, reason)
	if err != nil {
		return nil, err
	}
	if len(runs) == 0 {
		run, err := db.DelayedRunGet(ctx, s.pool, id)
		if err != nil {
			return nil, err
		}
		if run.CancelledAt == nil {
			return nil, fmt.Errorf("delayed run %s is firing: %w", id, axtype.ErrNotFound)
		}
		return run, nil
	}
	s.logger.InfoContext(ctx, "delayed run cancelled", "execution_id", id, "by", "id")
	return runs[0], nil
}

// ScheduledRun returns a delayed run that has not fired (pending or
// cancelled); axtype.ErrNotFound otherwise.
func (s *ExecutionService) ScheduledRun(ctx context.Context, id uuid.UUID) (*ScheduledRun, error) {
	return db.DelayedRunGet(ctx, s.pool, id)
}

// ScheduledRuns lists a job's pending delayed runs after a cursor,
// earliest first; axtype.ErrNotFound when there is no such job.
func (s *ExecutionService) ScheduledRuns(ctx context.Context, jobID uuid.UUID, afterRunAt time.Time, afterID uuid.UUID, limit int) ([]*ScheduledRun, error) {
	if _, err := db.JobGetByID(ctx, s.pool, jobID); err != nil {
		return nil, err
	}
	return db.DelayedRunListByJob(ctx, s.pool, jobID, afterRunAt, afterID, limit)
}
