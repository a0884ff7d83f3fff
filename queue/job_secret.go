package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// DefaultSecretOverlap is how long a rotated-out signing secret keeps
// signing alongside the new one, unless the rotation says otherwise.
const DefaultSecretOverlap = 24 * time.Hour

// newSigningSecret stores a fresh signing secret for a new job in tx and
// returns it (shown once).
func newSigningSecret(ctx context.Context, tx pgx.Tx, jobID uuid.UUID) (string, error) {
	secret := webhook.NewSecret().Text()
	if err := db.JobSecretInsert(ctx, tx, jobID, secret); err != nil {
		return "", err
	}
	return secret, nil
}

// RotateSecret gives a job a new signing secret and returns it (shown
// once). The old one keeps signing for overlap (both signatures are sent),
// so receivers can switch without losing a message; it returns until when.
func (s *JobService) RotateSecret(ctx context.Context, jobID uuid.UUID, overlap time.Duration) (string, *time.Time, error) {
	secret := webhook.NewSecret().Text()
	until, err := db.JobSecretRotate(ctx, s.pool, jobID, secret, overlap)
	if err != nil {
		return "", nil, fmt.Errorf("error rotating signing secret: %w", err)
	}
	s.logger.InfoContext(ctx, "job signing secret rotated", "job_id", jobID, "previous_valid_until", until)
	return secret, until, nil
}
