package queue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// idempotencyLock is how long a request holds its Idempotency-Key while it
// runs; a retry meanwhile finds the key held. A holder that died frees
// the key for the same request after this long.
const idempotencyLock = time.Minute

// IdempotencyStore remembers, per API key, the requests made with an
// Idempotency-Key and their responses (24 hours), so a retry gets the
// first answer again. The API decides which requests and answers go
// through it; the store only claims, answers and frees keys.
type IdempotencyStore struct {
	pool *pgxpool.Pool
}

// NewIdempotencyStore returns an IdempotencyStore on pool.
func NewIdempotencyStore(pool *pgxpool.Pool) *IdempotencyStore {
	return &IdempotencyStore{pool: pool}
}

// Claim holds req's key for a minute while the request runs. When the key
// is held or answered already it returns that record and claimed false.
func (s *IdempotencyStore) Claim(ctx context.Context, req *axtype.IdempotentRequest) (prior *axtype.IdempotentResponse, claimed bool, err error) {
	return db.IdempotencyKeyClaimRequest(ctx, s.pool, req, idempotencyLock)
}

// Answer remembers the response to the request holding the key.
func (s *IdempotencyStore) Answer(ctx context.Context, req *axtype.IdempotentRequest, resp *axtype.IdempotentResponse) error {
	return db.IdempotencyKeyStoreResponse(ctx, s.pool, req, resp)
}

// Release frees the key of a request that failed in a way a retry may fix.
func (s *IdempotencyStore) Release(ctx context.Context, req *axtype.IdempotentRequest) error {
	return db.IdempotencyKeyReleaseRequest(ctx, s.pool, req)
}
