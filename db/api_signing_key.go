package db

import (
	"context"
	"fmt"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

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
func APISigningKeyGet(ctx context.Context, e Executor, id uuid.UUID) (*axtype.SigningKey, error) {
	r, err := queries.APISigningKeyGet(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting signing key %s: %w", id, mapErr(err))
	}
	labels, err := decodeKeyLabels(r.Labels)
	if err != nil {
		return nil, err
	}
	return &axtype.SigningKey{ID: r.ID, Secret: r.Secret, APIKey: &axtype.APIKey{ID: r.ApiKeyID, Name: r.Name, Scopes: r.Scopes,
		Labels: labels, Groups: r.Groups, MintedBy: r.MintedBy}}, nil
}
