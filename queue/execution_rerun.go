package queue

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
)

// ErrRunUnfinished means a re-run was asked of a run that has not ended.
var ErrRunUnfinished = errors.New("the run has not ended: re-run it once it has")

// RerunRequest asks for a re-run of one ended run.
type RerunRequest struct {
	ExecutionID uuid.UUID
	Shards      axtype.RerunShards // which shards run again; "" means all
	// Params overlay the original's params (nil: the original's).
	Params json.RawMessage
	// Priority overrides the original's.
	Priority *int
	// TraceParent is the caller's W3C trace context ("": a new trace).
	TraceParent string
	// RequestKey makes the re-run once per (run, key): a retried request
	// with the same key gets the run the first made. Required.
	RequestKey string
	// Cascade makes the re-run, once it ends, fire the downstream jobs of
	// its job again for its logical time.
	Cascade bool
}

// RerunResult is the re-run a request made or found.
type RerunResult struct {
	Execution *axtype.Execution
	Tasks     []*axtype.Task
	Replayed  bool // an earlier request with the same key made it
}

// Rerun makes a new execution (cause rerun) of the job of run
// req.ExecutionID, with its params and logical time (scheduled_for) and
// the shards req.Shards chooses (same indexes and params), linked to it.
// The original is not changed. A job whose concurrency policy is forbid
// refuses while it has an unfinished run (ErrOverlapForbidden); one whose
// policy is queue makes the re-run wait behind it (ErrOverlapQueueFull
// when a run waits already).
func (s *ExecutionService) Rerun(ctx context.Context, req *RerunRequest) (*RerunResult, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("error generating execution id: %w", err)
	}
	if req.RequestKey == "" {
		return nil, errors.New("a re-run needs a request key")
	}
	r := &db.NewRerun{ID: id, RerunOf: req.ExecutionID, RequestKey: req.RequestKey, Shards: req.Shards,
		Params: req.Params, Priority: req.Priority, TraceParent: req.TraceParent, Cascade: req.Cascade}
	if r.Shards == "" {
		r.Shards = axtype.RerunAll
	}
	out := &RerunResult{}
	err = db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		orig, err := db.ExecutionGetByID(ctx, tx, req.ExecutionID)
		if err != nil {
			return s.gone(ctx, req.ExecutionID, err)
		}
		if !orig.State.Ended() {
			return ErrRunUnfinished
		}
		prior, err := db.ExecutionRerunClaim(ctx, tx, r)
		if err != nil {
			return err
		}
		if prior != uuid.Nil {
			out.Replayed, id = true, prior
		} else if err := s.insertRerun(ctx, tx, orig, r); err != nil {
			return err
		}
		out.Execution, err = db.ExecutionGetByID(ctx, tx, id)
		return err
	})
	if err != nil {
		return nil, err
	}
	if out.Tasks, err = db.TaskListByExecution(ctx, s.pool, id); err != nil {
		return nil, err
	}
	if !out.Replayed {
		s.notifier.AfterCommit(notify.TaskReadyChannel) // as Trigger
		s.metrics.Fires.WithLabelValues(string(axtype.CauseRerun)).Inc()
		s.logger.InfoContext(ctx, "execution re-run", "execution_id", id, "rerun_of", req.ExecutionID,
			"job_id", out.Execution.JobID, "shards", string(r.Shards), "tasks", len(out.Tasks))
	}
	return out, nil
}

// insertRerun writes the re-run's execution and tasks, honouring the
// job's concurrency policy as a manual trigger does.
func (s *ExecutionService) insertRerun(ctx context.Context, tx pgx.Tx, orig *axtype.Execution, r *db.NewRerun) error {
	job, err := db.JobGetByIDForUpdate(ctx, tx, orig.JobID)
	if err != nil {
		return err
	}
	if job.ConcurrencyPolicy == axtype.ConcurrencyForbid {
		unfinished, err := db.ExecutionHasUnfinished(ctx, tx, job.ID)
		if err != nil {
			return err
		}
		if unfinished {
			return ErrOverlapForbidden
		}
	}
	tasks, err := db.ExecutionRerunInsert(ctx, tx, r, s.router.RouteFunc(tx))
	if err != nil {
		return err
	}
	if err := holdIfUnfinished(ctx, tx, job, r.ID); err != nil {
		return err
	}
	if err := s.outbox.Fired(ctx, tx, tasks); err != nil {
		return err
	}
	return db.Notify(ctx, tx, notify.TaskReadyChannel, "")
}

// BulkRerunRequest selects ended runs and re-runs each, at most
// Filter.Limit of them.
type BulkRerunRequest struct {
	Filter db.RerunCandidateParams
	Shards axtype.RerunShards
	// RequestKey makes each re-run once per (run, key), so a retried bulk
	// request re-runs nothing twice. Required unless DryRun.
	RequestKey string
	// DryRun lists what would be re-run and changes nothing.
	DryRun bool
	// MaxTasks stops the call once its re-runs made this many tasks (the
	// re-run that passes it is made whole); 0: axtype.MaxTasksPerBatch.
	MaxTasks int
}

// BulkRerunItem is one selected run and what became of it.
type BulkRerunItem struct {
	Original axtype.RerunCandidate
	RerunID  uuid.UUID // uuid.Nil in a dry run or when not re-run
	Replayed bool      // an earlier request with the same key re-ran it
	Error    string    // why it was not re-run
}

// BulkRerunResult lists the runs a bulk re-run selected.
type BulkRerunResult struct {
	Items []BulkRerunItem
	// Truncated says more runs matched than the cap, or the re-runs made
	// reached the task bound first: ask again (the same key re-runs none
	// of these twice) or narrow the filter.
	Truncated bool
}

// BulkRerun selects the ended runs req.Filter matches (oldest first, at
// most Filter.Limit) and re-runs each in a transaction of its own, until
// the re-runs made req.MaxTasks tasks. Unbounded, one call of 1,000 runs
// of 10,000 shards made 10 million tasks in one request, a minute and
// more on the request pool that serves every caller of the replica.
func (s *ExecutionService) BulkRerun(ctx context.Context, req *BulkRerunRequest) (*BulkRerunResult, error) {
	maxTasks := cmp.Or(req.MaxTasks, axtype.MaxTasksPerBatch)
	limit := req.Filter.Limit
	filter := req.Filter
	filter.Limit = limit + 1
	filter.RequestKey = req.RequestKey
	found, err := db.ExecutionRerunCandidates(ctx, s.pool, &filter)
	if err != nil {
		return nil, err
	}
	out := &BulkRerunResult{Truncated: len(found) > limit}
	if out.Truncated {
		found = found[:limit]
	}
	made := 0
	for _, c := range found {
		if made >= maxTasks {
			out.Truncated = true
			break
		}
		item := BulkRerunItem{Original: c}
		if !req.DryRun {
			res, err := s.Rerun(ctx, &RerunRequest{ExecutionID: c.ID, Shards: req.Shards, RequestKey: req.RequestKey})
			switch {
			case err == nil:
				item.RerunID, item.Replayed = res.Execution.ID, res.Replayed
				if !res.Replayed {
					made += len(res.Tasks)
				}
			case errors.Is(err, axtype.ErrNothingToRerun), errors.Is(err, ErrOverlapForbidden), errors.Is(err, ErrRunUnfinished),
				errors.Is(err, ErrOverlapQueueFull):
				item.Error = err.Error()
			default:
				return nil, err
			}
		}
		out.Items = append(out.Items, item)
	}
	return out, nil
}

// Lineage returns what run id re-runs, its re-runs, its backfill and what
// it waited behind, in one statement (CausedBy says what fired it).
func (s *ExecutionService) Lineage(ctx context.Context, id uuid.UUID) (*axtype.RunLineage, error) {
	return db.ExecutionLineage(ctx, s.pool, id)
}
