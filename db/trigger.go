package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// TriggerSetNextFire sets when a job fires next (nil: never).
func TriggerSetNextFire(ctx context.Context, e Executor, jobID uuid.UUID, next *time.Time) (*dbsqlc.AxTrigger, error) {
	t, err := queries.TriggerSetNextFire(ctx, e, dbsqlc.TriggerSetNextFireParams{JobID: jobID, NextFireAt: next})
	if err != nil {
		return nil, fmt.Errorf("error setting next fire of job %s: %w", jobID, mapErr(err))
	}
	return &t, nil
}

// TriggerPause stops a job from firing; its next_fire_at stays so that the
// fires missed while paused can be accounted for on resume.
func TriggerPause(ctx context.Context, e Executor, jobID uuid.UUID) error {
	if _, err := queries.TriggerPause(ctx, e, jobID); err != nil {
		return fmt.Errorf("error pausing job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// TriggerResume lets a paused job fire again.
func TriggerResume(ctx context.Context, e Executor, jobID uuid.UUID) error {
	if _, err := queries.TriggerResume(ctx, e, jobID); err != nil {
		return fmt.Errorf("error resuming job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// TriggerSetAsideParams names jobs the trigger loop stops firing, each
// with why.
type TriggerSetAsideParams struct {
	JobIDs  []uuid.UUID
	Reasons []string
}

// TriggerSetAside stops the trigger loop from firing jobs whose fire
// failed until they are updated; their next_fire_at stays.
func TriggerSetAside(ctx context.Context, e Executor, p *TriggerSetAsideParams) error {
	if len(p.JobIDs) == 0 {
		return nil
	}
	err := queries.TriggerSetAside(ctx, e, dbsqlc.TriggerSetAsideParams{JobIds: p.JobIDs, Reasons: p.Reasons})
	if err != nil {
		return fmt.Errorf("error setting jobs aside: %w", mapErr(err))
	}
	return nil
}
