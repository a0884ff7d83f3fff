package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// ConsoleSessionInsert opens a session whose id has SHA-256 idHash for
// key: it ends after idle without use, and at max at the latest.
func ConsoleSessionInsert(ctx context.Context, e Executor, idHash []byte, keyID uuid.UUID, csrf string, idle, max time.Duration) error {
	err := queries.ConsoleSessionInsert(ctx, e, dbsqlc.ConsoleSessionInsertParams{IDHash: idHash, KeyID: keyID, Csrf: csrf,
		IdleSeconds: idle.Seconds(), MaxSeconds: max.Seconds()})
	if err != nil {
		return fmt.Errorf("error opening console session: %w", mapErr(err))
	}
	return nil
}

// ConsoleSessionGet returns the live session with this id hash, of a live
// key, and keeps it alive for idle more; ErrNotFound otherwise.
func ConsoleSessionGet(ctx context.Context, e Executor, idHash []byte, idle time.Duration) (*axtype.ConsoleSession, error) {
	r, err := queries.ConsoleSessionGet(ctx, e, dbsqlc.ConsoleSessionGetParams{IDHash: idHash, IdleSeconds: idle.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error reading console session: %w", mapErr(err))
	}
	labels, err := decodeKeyLabels(r.Labels)
	if err != nil {
		return nil, err
	}
	return &axtype.ConsoleSession{CSRF: r.Csrf, Key: &axtype.APIKey{ID: r.ID, Name: r.Name, Scopes: r.Scopes, Labels: labels,
		Groups: r.Groups, MintedBy: r.MintedBy}}, nil
}

// ConsoleSessionDelete ends a session (logout).
func ConsoleSessionDelete(ctx context.Context, e Executor, idHash []byte) error {
	if _, err := queries.ConsoleSessionDelete(ctx, e, idHash); err != nil {
		return fmt.Errorf("error ending console session: %w", mapErr(err))
	}
	return nil
}

// ConsoleSessionDeleteExpired deletes the sessions that ended.
func ConsoleSessionDeleteExpired(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.ConsoleSessionDeleteExpired(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error deleting ended console sessions: %w", mapErr(err))
	}
	return n, nil
}
