package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// SigningKey is a secret for HMAC-signed requests, acting for an API key.
type SigningKey struct {
	ID     uuid.UUID
	Secret []byte
	APIKey *APIKey // id, name, scopes, labels and groups of the key it acts for
}

// APISigningKeyInsert stores a signing key for an API key.
func APISigningKeyInsert(ctx context.Context, e Executor, id, apiKeyID uuid.UUID, secret []byte) error {
	_, err := queries.APISigningKeyInsert(ctx, e, dbsqlc.APISigningKeyInsertParams{ID: id, ApiKeyID: apiKeyID, Secret: secret})
	if err != nil {
		return fmt.Errorf("error storing signing key for api key %s: %w", apiKeyID, mapErr(err))
	}
	return nil
}

// APISigningKeyGet returns a live signing key; ErrNotFound when it or its
// API key is unknown or revoked.
func APISigningKeyGet(ctx context.Context, e Executor, id uuid.UUID) (*SigningKey, error) {
	r, err := queries.APISigningKeyGet(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting signing key %s: %w", id, mapErr(err))
	}
	labels, err := decodeKeyLabels(r.Labels)
	if err != nil {
		return nil, err
	}
	return &SigningKey{ID: r.ID, Secret: r.Secret, APIKey: &APIKey{ID: r.ApiKeyID, Name: r.Name, Scopes: r.Scopes,
		Labels: labels, Groups: r.Groups, MintedBy: r.MintedBy}}, nil
}

// NonceCheck is what the database says of a signed request's timestamp
// and nonce.
type NonceCheck struct {
	FreshTimestamp bool      // within the window of the database clock
	FreshNonce     bool      // not seen within the window: recorded now
	ServerTime     time.Time // the database clock
}

// NonceUse checks a signed request's timestamp against the database
// clock and records its nonce for as long as the timestamp is acceptable.
func NonceUse(ctx context.Context, e Executor, keyID uuid.UUID, nonce string, timestamp int64, window time.Duration) (NonceCheck, error) {
	r, err := queries.NonceUse(ctx, e, dbsqlc.NonceUseParams{KeyID: keyID, Nonce: nonce, Timestamp: timestamp,
		WindowSeconds: int64(window.Seconds())})
	if err != nil {
		return NonceCheck{}, fmt.Errorf("error recording nonce: %w", mapErr(err))
	}
	return NonceCheck{FreshTimestamp: r.FreshTimestamp, FreshNonce: r.FreshNonce, ServerTime: time.Unix(r.ServerTime, 0).UTC()}, nil
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
