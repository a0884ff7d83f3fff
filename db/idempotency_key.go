package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// IdempotencyKeyClaim stores rec unless a live record with the same key
// exists; then it returns that one and claimed is false. Run it in the
// transaction of the change it guards, so the key and the change commit
// together; a concurrent claim of the same key waits for that commit.
func IdempotencyKeyClaim(ctx context.Context, e Executor, rec *axtype.IdempotencyRecord) (existing *axtype.IdempotencyRecord, claimed bool, err error) {
	status := int32(rec.ResponseStatus)
	_, err = queries.IdempotencyKeyClaim(ctx, e, dbsqlc.IdempotencyKeyClaimParams{
		ApiKeyID: rec.APIKeyID, Key: rec.Key, Method: rec.Method, Path: rec.Path,
		RequestHash: rec.RequestHash, ResponseStatus: &status, ResponseBody: rec.ResponseBody,
	})
	if err == nil {
		return nil, true, nil
	}
	if err = mapErr(err); !errors.Is(err, axtype.ErrNotFound) {
		return nil, false, fmt.Errorf("error claiming idempotency key: %w", err)
	}
	r, err := queries.IdempotencyKeyGet(ctx, e, dbsqlc.IdempotencyKeyGetParams{ApiKeyID: rec.APIKeyID, Key: rec.Key})
	if err != nil {
		return nil, false, fmt.Errorf("error reading idempotency key: %w", mapErr(err))
	}
	return &axtype.IdempotencyRecord{APIKeyID: r.ApiKeyID, Key: r.Key, Method: r.Method, Path: r.Path,
		RequestHash: r.RequestHash, ResponseStatus: int(deref(r.ResponseStatus)), ResponseBody: r.ResponseBody}, false, nil
}

// IdempotencyKeyClaimRequest holds the key for req for lock. When the key is
// held or answered already it returns that record and claimed false.
func IdempotencyKeyClaimRequest(ctx context.Context, e Executor, req *axtype.IdempotentRequest, lock time.Duration) (prior *axtype.IdempotentResponse, claimed bool, err error) {
	_, err = queries.IdempotencyKeyClaimRequest(ctx, e, dbsqlc.IdempotencyKeyClaimRequestParams{ApiKeyID: req.APIKeyID,
		Key: req.Key, Method: req.Method, Path: req.Path, RequestHash: req.RequestHash, LockSeconds: lock.Seconds()})
	if err == nil {
		return nil, true, nil
	}
	if err = mapErr(err); !errors.Is(err, axtype.ErrNotFound) {
		return nil, false, fmt.Errorf("error claiming idempotency key: %w", err)
	}
	r, err := queries.IdempotencyKeyGetRequest(ctx, e, dbsqlc.IdempotencyKeyGetRequestParams{ApiKeyID: req.APIKeyID, Key: req.Key})
	if err != nil {
		return nil, false, fmt.Errorf("error reading idempotency key: %w", mapErr(err))
	}
	return &axtype.IdempotentResponse{Method: r.Method, Path: r.Path, RequestHash: r.RequestHash,
		Status: int(deref(r.ResponseStatus)), Body: r.ResponseBody, Headers: r.ResponseHeaders}, false, nil
}

// IdempotencyKeyStoreResponse remembers the response to the request holding
// the key.
func IdempotencyKeyStoreResponse(ctx context.Context, e Executor, req *axtype.IdempotentRequest, resp *axtype.IdempotentResponse) error {
	status := int32(resp.Status)
	err := queries.IdempotencyKeyStoreResponse(ctx, e, dbsqlc.IdempotencyKeyStoreResponseParams{ApiKeyID: req.APIKeyID,
		Key: req.Key, ResponseStatus: &status, ResponseBody: resp.Body, ResponseHeaders: jsonOr(resp.Headers, "{}")})
	if err != nil {
		return fmt.Errorf("error storing idempotent response: %w", mapErr(err))
	}
	return nil
}

// IdempotencyKeyReleaseRequest frees the key of a request that failed in a
// way a retry may fix.
func IdempotencyKeyReleaseRequest(ctx context.Context, e Executor, req *axtype.IdempotentRequest) error {
	err := queries.IdempotencyKeyReleaseRequest(ctx, e, dbsqlc.IdempotencyKeyReleaseRequestParams{ApiKeyID: req.APIKeyID, Key: req.Key})
	if err != nil {
		return fmt.Errorf("error releasing idempotency key: %w", mapErr(err))
	}
	return nil
}

// IdempotencyKeyDeleteExpired forgets keys past their 24 hours.
func IdempotencyKeyDeleteExpired(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.IdempotencyKeyDeleteExpired(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error deleting expired idempotency keys: %w", mapErr(err))
	}
	return n, nil
}

// IdempotencyKeyClaimMany claims distinct keys of one API key for POST
// requests answered 202, in the caller's transaction. It returns the
// records of the keys that were live already (their requests made
// before), by key; the other keys are claimed.
func IdempotencyKeyClaimMany(ctx context.Context, e Executor, apiKeyID uuid.UUID, claims []axtype.IdempotencyClaim) (map[string]*axtype.IdempotencyRecord, error) {
	if len(claims) == 0 {
		return nil, nil
	}
	p := dbsqlc.IdempotencyKeyClaimManyParams{ApiKeyID: apiKeyID}
	for _, c := range claims {
		p.Keys = append(p.Keys, c.Key)
		p.Paths = append(p.Paths, c.Path)
		p.RequestHashes = append(p.RequestHashes, c.RequestHash)
		p.ResponseBodies = append(p.ResponseBodies, c.ResponseBody)
		p.ExpiresAts = append(p.ExpiresAts, c.ExpiresAt)
	}
	claimed, err := queries.IdempotencyKeyClaimMany(ctx, e, p)
	if err != nil {
		return nil, fmt.Errorf("error claiming idempotency keys: %w", mapErr(err))
	}
	if len(claimed) == len(claims) {
		return nil, nil
	}
	got := make(map[string]bool, len(claimed))
	for _, k := range claimed {
		got[k] = true
	}
	var live []string
	for _, c := range claims {
		if !got[c.Key] {
			live = append(live, c.Key)
		}
	}
	rows, err := queries.IdempotencyKeyGetMany(ctx, e, dbsqlc.IdempotencyKeyGetManyParams{ApiKeyID: apiKeyID, Keys: live})
	if err != nil {
		return nil, fmt.Errorf("error reading idempotency keys: %w", mapErr(err))
	}
	out := make(map[string]*axtype.IdempotencyRecord, len(rows))
	for _, r := range rows {
		out[r.Key] = &axtype.IdempotencyRecord{APIKeyID: apiKeyID, Key: r.Key, Method: r.Method, Path: r.Path,
			RequestHash: r.RequestHash, ResponseStatus: int(deref(r.ResponseStatus)), ResponseBody: r.ResponseBody}
	}
	return out, nil
}

// IdempotencyKeyLookup returns the live record of key; ErrNotFound when
// there is none.
func IdempotencyKeyLookup(ctx context.Context, e Executor, apiKeyID uuid.UUID, key string) (*axtype.IdempotencyRecord, error) {
	r, err := queries.IdempotencyKeyGet(ctx, e, dbsqlc.IdempotencyKeyGetParams{ApiKeyID: apiKeyID, Key: key})
	if err != nil {
		if err = mapErr(err); errors.Is(err, axtype.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("error reading idempotency key: %w", err)
	}
	return &axtype.IdempotencyRecord{APIKeyID: r.ApiKeyID, Key: r.Key, Method: r.Method, Path: r.Path,
		RequestHash: r.RequestHash, ResponseStatus: int(deref(r.ResponseStatus)), ResponseBody: r.ResponseBody}, nil
}

// IdempotencyKeyExtend keeps key live until at least until.
func IdempotencyKeyExtend(ctx context.Context, e Executor, apiKeyID uuid.UUID, key string, until time.Time) error {
	err := queries.IdempotencyKeyExtend(ctx, e, dbsqlc.IdempotencyKeyExtendParams{ApiKeyID: apiKeyID, Key: key, Until: until})
	if err != nil {
		return fmt.Errorf("error extending idempotency key: %w", mapErr(err))
	}
	return nil
}
