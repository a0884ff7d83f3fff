package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// NonceUse checks a signed request's timestamp against the database
// clock and records its nonce for as long as the timestamp is acceptable.
func NonceUse(ctx context.Context, e Executor, keyID uuid.UUID, nonce string, timestamp int64, window time.Duration) (axtype.NonceCheck, error) {
	r, err := queries.NonceUse(ctx, e, dbsqlc.NonceUseParams{KeyID: keyID, Nonce: nonce, Timestamp: timestamp,
		WindowSeconds: int64(window.Seconds())})
	if err != nil {
		return axtype.NonceCheck{}, fmt.Errorf("error recording nonce: %w", mapErr(err))
	}
	return axtype.NonceCheck{FreshTimestamp: r.FreshTimestamp, FreshNonce: r.FreshNonce, ServerTime: time.Unix(r.ServerTime, 0).UTC()}, nil
}

// NonceDeleteExpired forgets nonces whose requests would be refused as
// stale anyway.
func NonceDeleteExpired(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.NonceDeleteExpired(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error deleting expired nonces: %w", mapErr(err))
	}
	return n, nil
}
