package queue

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
)

// RunGroup is the group of ad-hoc runs whose definition names none.
const RunGroup = "runs"

// RunResult is an ad-hoc run: its execution, the manual job that holds its
// definition, and that job's signing secret.
type RunResult struct {
	Execution     *axtype.Execution
	Scheduled     *axtype.DelayedRun // instead of Execution: a run for later that has yet to fire
	SigningSecret string
	Replayed      bool // the Idempotency-Key had been used for this request
}

// Run submits an ad-hoc one-off run: def is stored as a manual job (named
// "run-<execution id>" in group "runs" unless it says otherwise) and fired
// at once, in one transaction with the idempotency record of req (whose
// JobID is ignored). A replay returns the first run without its secret,
// which is shown once (Replayed tells the caller why it is empty). With
// runAt the run is stored as a delayed run of that job instead of fired.
func (s *ExecutionService) Run(ctx context.Context, def *axtype.Job, req *TriggerRequest, runAt *time.Time) (*RunResult, error) {
	execID, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("error generating execution id: %w", err)
	}
	if def.ID, err = uuid.NewV7(); err != nil {
		return nil, fmt.Errorf("error generating job id: %w", err)
	}
	def.TriggerKind, def.NextFireAt, def.RunAt, def.Triggers = axtype.TriggerManual, nil, nil, nil
	def.Name = cmp.Or(def.Name, "run-"+execID.String())
	def.Group = cmp.Or(def.Group, RunGroup)
	if err := ValidateJob(def, time.Now()); err != nil {
		return nil, err
	}
	out := &RunResult{}
	err = db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		if req.IdempotencyKey != "" {
			prior, err := s.claimKey(ctx, tx, req, execID)
			if err != nil || prior != uuid.Nil {
				if err == nil {
					err = s.replayRun(ctx, tx, prior, out)
				}
				return err
			}
		}
		return s.submitRun(ctx, tx, def, req, execID, runAt, out)
	})
	if err != nil {
		return nil, err
	}
	switch {
	case out.Replayed:
	case runAt != nil:
		s.logger.InfoContext(ctx, "ad-hoc run scheduled", "job_id", def.ID, "execution_id", execID, "run_at", out.Scheduled.RunAt)
	default:
		s.metrics.Fires.WithLabelValues(string(axtype.CauseManual)).Inc()
		s.logger.InfoContext(ctx, "ad-hoc run submitted", "job_id", def.ID, "execution_id", execID)
	}
	return out, nil
}

func (s *ExecutionService) submitRun(ctx context.Context, tx pgx.Tx, def *axtype.Job, req *TriggerRequest, execID uuid.UUID, runAt *time.Time, out *RunResult) error {
	job, err := db.JobInsert(ctx, tx, def)
	if err != nil {
		return err
	}
	if out.SigningSecret, err = newSigningSecret(ctx, tx, job.ID); err != nil {
		return err
	}
	if runAt != nil {
		return s.scheduleRun(ctx, tx, job.ID, req, execID, *runAt, out)
	}
	fire := *req
	fire.JobID = job.ID
	out.Execution, err = s.fireNow(ctx, tx, &fire, execID)
	return err
}

// scheduleRun stores the ad-hoc run as a delayed run of its job; its key
// lives until a day after runAt, so it can cancel the run until then.
func (s *ExecutionService) scheduleRun(ctx context.Context, tx pgx.Tx, jobID uuid.UUID, req *TriggerRequest, execID uuid.UUID, runAt time.Time, out *RunResult) error {
	now, err := db.Now(ctx, tx)
	if err != nil {
		return err
	}
	run := &axtype.DelayedRun{ID: execID, JobID: jobID, RunAt: laterOf(runAt, now), Params: req.Params,
		Priority: req.Priority, TraceParent: req.TraceParent}
	if err := db.DelayedRunInsertMany(ctx, tx, []*axtype.DelayedRun{run}); err != nil {
		return err
	}
	if req.IdempotencyKey != "" {
		if err := db.IdempotencyKeyExtend(ctx, tx, req.APIKeyID, req.IdempotencyKey, run.RunAt.Add(runKeyLife)); err != nil {
			return err
		}
	}
	if run.RunAt.Before(now.Add(runScheduledNotifyWithin)) {
		if err := db.Notify(ctx, tx, notify.RunScheduledChannel, ""); err != nil {
			return err
		}
	}
	out.Scheduled, err = db.DelayedRunGet(ctx, tx, execID)
	return err
}

func (s *ExecutionService) replayRun(ctx context.Context, tx pgx.Tx, execID uuid.UUID, out *RunResult) error {
	out.Replayed = true
	run, err := db.DelayedRunGet(ctx, tx, execID)
	if err == nil {
		out.Scheduled = run
		return nil
	}
	if !errors.Is(err, axtype.ErrNotFound) {
		return err
	}
	out.Execution, err = db.ExecutionGetByID(ctx, tx, execID)
	return err
}
