package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// APIKeyInsertParams describes a new key: Hash is SHA-256 of the secret,
// Prefix its first characters (shown in listings to tell keys apart);
// Labels, Groups and MintedBy as in APIKey.
type APIKeyInsertParams struct {
	ID       uuid.UUID
	Name     string
	Hash     []byte
	Prefix   string
	Scopes   []string
	Labels   map[string][]string
	Groups   []string
	MintedBy *uuid.UUID
}

func encodeKeyLabels(labels map[string][]string) ([]byte, error) {
	if labels == nil {
		return nil, nil
	}
	b, err := json.Marshal(labels)
	if err != nil {
		return nil, fmt.Errorf("error encoding key labels: %w", err)
	}
	return b, nil
}

func decodeKeyLabels(raw []byte) (map[string][]string, error) {
	if raw == nil {
		return nil, nil
	}
	var labels map[string][]string
	if err := json.Unmarshal(raw, &labels); err != nil {
		return nil, fmt.Errorf("error decoding key labels: %w", err)
	}
	return labels, nil
}

// APIKeyInsert stores a new key.
func APIKeyInsert(ctx context.Context, e Executor, p *APIKeyInsertParams) (*axtype.APIKey, error) {
	labels, err := encodeKeyLabels(p.Labels)
	if err != nil {
		return nil, err
	}
	r, err := queries.APIKeyInsert(ctx, e, dbsqlc.APIKeyInsertParams{
		ID: p.ID, Name: p.Name, KeyHash: p.Hash, KeyPrefix: p.Prefix, Scopes: p.Scopes,
		Labels: labels, Groups: p.Groups, MintedBy: p.MintedBy,
	})
	if err != nil {
		return nil, fmt.Errorf("error inserting api key: %w", mapErr(err))
	}
	return &axtype.APIKey{ID: r.ID, Name: r.Name, Prefix: r.KeyPrefix, Scopes: r.Scopes, Labels: p.Labels,
		Groups: r.Groups, MintedBy: r.MintedBy, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt}, nil
}

// APIKeyAuthenticate returns the live key with this hash, or ErrNotFound.
func APIKeyAuthenticate(ctx context.Context, e Executor, hash []byte) (*axtype.APIKey, error) {
	r, err := queries.APIKeyAuthenticate(ctx, e, hash)
	if err != nil {
		return nil, fmt.Errorf("error authenticating api key: %w", mapErr(err))
	}
	labels, err := decodeKeyLabels(r.Labels)
	if err != nil {
		return nil, err
	}
	return &axtype.APIKey{ID: r.ID, Name: r.Name, Scopes: r.Scopes, Labels: labels, Groups: r.Groups, MintedBy: r.MintedBy}, nil
}

// APIKeyList returns up to max keys, revoked ones included, oldest first,
// after the key after (nil: from the first); an error wrapping
// axtype.ErrNotFound when after is no key.
func APIKeyList(ctx context.Context, e Executor, after *uuid.UUID, max int) ([]*axtype.APIKey, error) {
	rows, err := queries.APIKeyList(ctx, e, dbsqlc.APIKeyListParams{After: after, Max: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("error listing api keys: %w", mapErr(err))
	}
	if after != nil && len(rows) == 0 { // the end, or a cursor naming no key
		ok, err := queries.APIKeyExists(ctx, e, *after)
		if err != nil {
			return nil, fmt.Errorf("error listing api keys: %w", mapErr(err))
		}
		if !ok {
			return nil, fmt.Errorf("error listing api keys after %s: %w", after, axtype.ErrNotFound)
		}
	}
	keys := make([]*axtype.APIKey, 0, len(rows))
	for _, r := range rows {
		labels, err := decodeKeyLabels(r.Labels)
		if err != nil {
			return nil, err
		}
		keys = append(keys, &axtype.APIKey{ID: r.ID, Name: r.Name, Prefix: r.KeyPrefix, Scopes: r.Scopes, Labels: labels,
			Groups: r.Groups, MintedBy: r.MintedBy, CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt})
	}
	return keys, nil
}

// APIKeyRevoke revokes a key, and with it (trigger api_key_revoked) the
// agent tokens it minted, whose agents go offline; ErrNotFound when no
// live key has that id. Replicas forget their cached keys on the
// notification ax_api_key_revoked.
func APIKeyRevoke(ctx context.Context, e Executor, id uuid.UUID) error {
	n, err := queries.APIKeyRevoke(ctx, e, id)
	if err != nil {
		return fmt.Errorf("error revoking api key %s: %w", id, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("error revoking api key %s: %w", id, axtype.ErrNotFound)
	}
	return nil
}

// APIKeyEnsure stores a key unless a key with the same hash exists (even a
// revoked one: revoking a bootstrap key must stick).
func APIKeyEnsure(ctx context.Context, e Executor, p *APIKeyInsertParams) error {
	if p.Labels != nil || p.Groups != nil || p.MintedBy != nil {
		return errors.New("error ensuring api key: bootstrap keys carry no labels, groups or minter")
	}
	err := queries.APIKeyEnsure(ctx, e, dbsqlc.APIKeyEnsureParams{
		ID: p.ID, Name: p.Name, KeyHash: p.Hash, KeyPrefix: p.Prefix, Scopes: p.Scopes,
	})
	if err != nil {
		return fmt.Errorf("error ensuring api key: %w", mapErr(err))
	}
	return nil
}
