package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// APIKey is a stored API key; the secret itself is never stored.
type APIKey struct {
	ID         uuid.UUID
	Name       string
	Prefix     string
	Scopes     []string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}

// APIKeyInsertParams describes a new key: Hash is SHA-256 of the secret,
// Prefix its first characters (shown in listings to tell keys apart).
type APIKeyInsertParams struct {
	ID     uuid.UUID
	Name   string
	Hash   []byte
	Prefix string
	Scopes []string
}

// APIKeyInsert stores a new key.
func APIKeyInsert(ctx context.Context, e Executor, p *APIKeyInsertParams) (*APIKey, error) {
	r, err := queries.APIKeyInsert(ctx, e, dbsqlc.APIKeyInsertParams{
		ID: p.ID, Name: p.Name, KeyHash: p.Hash, KeyPrefix: p.Prefix, Scopes: p.Scopes,
	})
	if err != nil {
		return nil, fmt.Errorf("error inserting api key: %w", mapErr(err))
	}
	return &APIKey{ID: r.ID, Name: r.Name, Prefix: r.KeyPrefix, Scopes: r.Scopes,
		CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt}, nil
}

// APIKeyAuthenticate returns the live key with this hash, or ErrNotFound.
func APIKeyAuthenticate(ctx context.Context, e Executor, hash []byte) (*APIKey, error) {
	r, err := queries.APIKeyAuthenticate(ctx, e, hash)
	if err != nil {
		return nil, fmt.Errorf("error authenticating api key: %w", mapErr(err))
	}
	return &APIKey{ID: r.ID, Name: r.Name, Scopes: r.Scopes}, nil
}

// APIKeyList returns every key, revoked ones included.
func APIKeyList(ctx context.Context, e Executor) ([]*APIKey, error) {
	rows, err := queries.APIKeyList(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error listing api keys: %w", mapErr(err))
	}
	keys := make([]*APIKey, 0, len(rows))
	for _, r := range rows {
		keys = append(keys, &APIKey{ID: r.ID, Name: r.Name, Prefix: r.KeyPrefix, Scopes: r.Scopes,
			CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt})
	}
	return keys, nil
}

// APIKeyRevoke revokes a key; ErrNotFound when no live key has that id.
func APIKeyRevoke(ctx context.Context, e Executor, id uuid.UUID) error {
	n, err := queries.APIKeyRevoke(ctx, e, id)
	if err != nil {
		return fmt.Errorf("error revoking api key %s: %w", id, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("error revoking api key %s: %w", id, ErrNotFound)
	}
	return nil
}

// APIKeyEnsure stores a key unless a key with the same hash exists (even a
// revoked one: revoking a bootstrap key must stick).
func APIKeyEnsure(ctx context.Context, e Executor, p *APIKeyInsertParams) error {
	err := queries.APIKeyEnsure(ctx, e, dbsqlc.APIKeyEnsureParams{
		ID: p.ID, Name: p.Name, KeyHash: p.Hash, KeyPrefix: p.Prefix, Scopes: p.Scopes,
	})
	if err != nil {
		return fmt.Errorf("error ensuring api key: %w", mapErr(err))
	}
	return nil
}
