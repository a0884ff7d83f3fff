package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// JobSecretInsert stores a new job's signing secret.
func JobSecretInsert(ctx context.Context, e Executor, jobID uuid.UUID, secret string) error {
	if err := queries.JobSecretInsert(ctx, e, dbsqlc.JobSecretInsertParams{JobID: jobID, Secret: secret}); err != nil {
		return fmt.Errorf("error storing signing secret of job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// JobSecretRotate makes secret the job's signing secret and keeps the old
// one valid for keep; it returns until when (nil for a job that had none).
// ErrNotFound when there is no such job.
func JobSecretRotate(ctx context.Context, e Executor, jobID uuid.UUID, secret string, keep time.Duration) (*time.Time, error) {
	until, err := queries.JobSecretRotate(ctx, e, dbsqlc.JobSecretRotateParams{JobID: jobID, Secret: secret, KeepSeconds: keep.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error rotating signing secret of job %s: %w", jobID, mapErr(err))
	}
	return utcPtr(until), nil
}

// JobSecretGet returns a job's signing secrets; ErrNotFound when it has
// none.
func JobSecretGet(ctx context.Context, e Executor, jobID uuid.UUID) (axtype.JobSecrets, error) {
	r, err := queries.JobSecretGet(ctx, e, jobID)
	if err != nil {
		return axtype.JobSecrets{}, fmt.Errorf("error getting signing secret of job %s: %w", jobID, mapErr(err))
	}
	out := axtype.JobSecrets{Current: r.Secret, Previous: r.PreviousSecret}
	if out.Previous != "" {
		out.PreviousExpiresAt = utcPtr(r.PreviousExpiresAt)
	}
	return out, nil
}

// JobSecretGetMany returns the signing secrets of jobs (current first) by
// job; a job without one is absent.
func JobSecretGetMany(ctx context.Context, e Executor, jobIDs []uuid.UUID) (map[uuid.UUID][]string, error) {
	rows, err := queries.JobSecretGetMany(ctx, e, jobIDs)
	if err != nil {
		return nil, fmt.Errorf("error getting signing secrets of %d jobs: %w", len(jobIDs), mapErr(err))
	}
	out := make(map[uuid.UUID][]string, len(rows))
	for _, r := range rows {
		out[r.JobID] = secretList(r.Secret, r.PreviousSecret)
	}
	return out, nil
}
