package openapi

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue"
)

// The tests set up keys as `ax key create` and `ax key sign` do, through
// the queue services; these keep the names the tests were written with.

type KeyLimits = queue.KeyLimits

var ParseKeyLabels = queue.ParseKeyLabels

func CreateAPIKeyWith(ctx context.Context, pool *pgxpool.Pool, name string, scopes []string, limits KeyLimits) (string, *db.APIKey, error) {
	return queue.NewKeyService(pool).Create(ctx, name, scopes, limits)
}

func CreateSigningKey(ctx context.Context, pool *pgxpool.Pool, apiKeyID uuid.UUID) (uuid.UUID, string, error) {
	return queue.NewSigningKeyService(pool).Create(ctx, apiKeyID)
}
