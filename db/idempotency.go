package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// IdempotencyRecord is the remembered outcome of a request made with an
// Idempotency-Key.
type IdempotencyRecord struct {
	APIKeyID       uuid.UUID
	Key            string
	Method, Path   string
	RequestHash    []byte
	ResponseStatus int
	ResponseBody   []byte
}

// IdempotencyKeyClaim stores rec unless a live record with the same key
// exists; then it returns that one and claimed is false. Run it in the
// transaction of the change it guards, so the key and the change commit
// together; a concurrent claim of the same key waits for that commit.
func IdempotencyKeyClaim(ctx context.Context, e Executor, rec *IdempotencyRecord) (existing *IdempotencyRecord, claimed bool, err error) {
	status := int32(rec.ResponseStatus)
	_, err = queries.IdempotencyKeyClaim(ctx, e, dbsqlc.IdempotencyKeyClaimParams{
		ApiKeyID: rec.APIKeyID, Key: rec.Key, Method: rec.Method, Path: rec.Path,
		RequestHash: rec.RequestHash, ResponseStatus: &status, ResponseBody: rec.ResponseBody,
	})
	if err == nil {
		return nil, true, nil
	}
	if err = mapErr(err); !errors.Is(err, ErrNotFound) {
		return nil, false, fmt.Errorf("error claiming idempotency key: %w", err)
	}
	r, err := queries.IdempotencyKeyGet(ctx, e, dbsqlc.IdempotencyKeyGetParams{ApiKeyID: rec.APIKeyID, Key: rec.Key})
	if err != nil {
		return nil, false, fmt.Errorf("error reading idempotency key: %w", mapErr(err))
	}
	return &IdempotencyRecord{APIKeyID: r.ApiKeyID, Key: r.Key, Method: r.Method, Path: r.Path,
		RequestHash: r.RequestHash, ResponseStatus: int(deref(r.ResponseStatus)), ResponseBody: r.ResponseBody}, false, nil
}
