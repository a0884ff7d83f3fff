package queue

import (
	"cmp"
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"
)

// RunGroup is the group of ad-hoc runs whose definition names none.
const RunGroup = "runs"

// RunResult is an ad-hoc run: its execution, the manual job that holds its
// definition, and that job's signing secret.
type RunResult struct {
	Execution     *db.Execution
	SigningSecret string
	Replayed      bool // the Idempotency-Key had been used for this request
}

// Run submits an ad-hoc one-off run: def is stored as a manual job (named
// "run-<execution id>" in group "runs" unless it says otherwise) and fired
// at once, in one transaction with the idempotency record of req (whose
// JobID is ignored). A replay returns the first run without its secret,
// which is shown once (Replayed tells the caller why it is empty).
func (s *ExecutionService) Run(ctx context.Context, def *db.Job, req *TriggerRequest) (*RunResult, error) {
	execID, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("error generating execution id: %w", err)
	}
	if def.ID, err = uuid.NewV7(); err != nil {
		return nil, fmt.Errorf("error generating job id: %w", err)
	}
	def.TriggerKind, def.NextFireAt, def.RunAt = db.TriggerManual, nil, nil
	def.Name = cmp.Or(def.Name, "run-"+execID.String())
	def.Group = cmp.Or(def.Group, RunGroup)
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
		return s.submitRun(ctx, tx, def, req, execID, out)
	})
	if err != nil {
		return nil, err
	}
	if !out.Replayed {
		s.metrics.Fires.WithLabelValues(string(db.CauseManual)).Inc()
		s.logger.InfoContext(ctx, "ad-hoc run submitted", "job_id", def.ID, "execution_id", execID)
	}
	return out, nil
}

func (s *ExecutionService) submitRun(ctx context.Context, tx pgx.Tx, def *db.Job, req *TriggerRequest, execID uuid.UUID, out *RunResult) error {
	job, err := db.JobInsert(ctx, tx, def)
	if err != nil {
		return err
	}
	if out.SigningSecret, err = newSigningSecret(ctx, tx, job.ID); err != nil {
		return err
	}
	fire := *req
	fire.JobID = job.ID
	out.Execution, err = s.fireNow(ctx, tx, &fire, execID)
	return err
}

func (s *ExecutionService) replayRun(ctx context.Context, tx pgx.Tx, execID uuid.UUID, out *RunResult) error {
	exec, err := db.ExecutionGetByID(ctx, tx, execID)
	if err != nil {
		return err
	}
	out.Execution, out.Replayed = exec, true
	return nil
}
