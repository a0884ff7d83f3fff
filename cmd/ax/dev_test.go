package main

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
)

// make run with DATABASE_URL naming a database that does not exist
// creates it when the role may; when it may not, the error says how.
func TestDevCreatesMissingDatabase(t *testing.T) {
	admin := os.Getenv("DATABASE_URL")
	if admin == "" {
		t.Skip("DATABASE_URL is not set")
	}
	ctx := t.Context()
	name := fmt.Sprintf("ax_dev_missing_%d", time.Now().UnixNano())
	url, err := db.WithDatabase(admin, name)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, admin)
	require.NoError(t, err)
	t.Cleanup(func() {
		// Not ctx: t.Context is cancelled before cleanups run, and with
		// it these drops did nothing (a database and a role left a run).
		bg := context.Background()
		_, _ = conn.Exec(bg, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		_, _ = conn.Exec(bg, "DROP ROLE IF EXISTS "+pgx.Identifier{name}.Sanitize())
		conn.Close(bg)
	})

	require.NoError(t, ensureURLDatabase(ctx, url))
	var exists bool
	require.NoError(t, conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists))
	require.True(t, exists)
	require.NoError(t, ensureURLDatabase(ctx, url), "an existing database is used as it is")

	// A role that may not create databases is told how.
	_, err = conn.Exec(ctx, "CREATE ROLE "+pgx.Identifier{name}.Sanitize()+" LOGIN NOCREATEDB")
	require.NoError(t, err)
	cfg, err := pgx.ParseConfig(admin)
	require.NoError(t, err)
	other := fmt.Sprintf("postgres://%s@%s:%d/%s_other", name, cfg.Host, cfg.Port, name)
	err = ensureURLDatabase(ctx, other)
	require.ErrorContains(t, err, "createdb "+name+"_other")
}
