package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/pgbouncertest"
)

// TestDetectTransactionPooler: a direct URL keeps its session (the probe
// NOTIFY comes back), a stock PgBouncer in transaction mode does not.
func TestDetectTransactionPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := dbtest.NewURL(t)
	pooled := pgbouncertest.Start(t, direct)
	behind, err := db.DetectTransactionPooler(ctx, direct, nil)
	require.NoError(t, err)
	require.False(t, behind, "direct")
	behind, err = db.DetectTransactionPooler(ctx, pooled, nil)
	require.NoError(t, err)
	require.True(t, behind, "through PgBouncer in transaction mode")
}

// TestPoolBehindPooler: a stock PgBouncer refuses the session settings
// OpenPool gives direct connections as startup parameters; opened
// BehindPooler the pool connects, and statements with typed arrays run
// unnamed, twice on a connection (a named prepared statement would clash
// on a server session another client prepared it on).
func TestPoolBehindPooler(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pooled := pgbouncertest.Start(t, dbtest.NewURL(t))
	_, err := db.OpenPool(ctx, pooled, db.PoolSize{MaxConns: 2})
	require.ErrorContains(t, err, "unsupported startup parameter", "a stock pooler refuses session settings at connect")

	pool, err := db.OpenPoolWith(ctx, pooled, db.PoolOptions{Size: db.PoolSize{MaxConns: 3}, BehindPooler: true})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	ids := []uuid.UUID{uuid.New(), uuid.New()}
	for range 3 {
		var n int
		require.NoError(t, pool.QueryRow(ctx, "SELECT cardinality($1::uuid[])", ids).Scan(&n))
		require.Equal(t, 2, n)
		require.NoError(t, pool.QueryRow(ctx, "SELECT cardinality($1::uuid[])", []uuid.UUID{}).Scan(&n))
		require.Equal(t, 0, n)
	}
	jobs, err := db.WithBatchTxV(ctx, pool, 1, func(tx pgx.Tx) (int, error) {
		var n int
		err := tx.QueryRow(ctx, "SELECT count(*) FROM ax.job").Scan(&n)
		return n, err
	})
	require.NoError(t, err)
	require.Zero(t, jobs)
}

// TestConnectCauseFirst: with sslmode=prefer against a server without
// TLS (PgBouncer here), pgconn lists the TLS refusal before what really
// failed; the error names the real cause first and leaves the refusal out.
func TestConnectCauseFirst(t *testing.T) {
	t.Parallel()
	pooled := pgbouncertest.Start(t, dbtest.NewURL(t))
	noSuchUser := strings.Replace(pooled, "postgres@", "nobody_here@", 1) + "&sslmode=prefer"
	if !strings.Contains(pooled, "?") {
		noSuchUser = strings.Replace(pooled, "postgres@", "nobody_here@", 1) + "?sslmode=prefer"
	}
	_, err := db.OpenPoolWith(context.Background(), noSuchUser, db.PoolOptions{BehindPooler: true})
	require.Error(t, err)
	require.NotContains(t, err.Error(), "refused TLS", err.Error())
	require.Contains(t, err.Error(), "error connecting to database: failed to connect: ", err.Error())
	require.Contains(t, err.Error(), "authentication failed", "the cause PgBouncer gave")
	var connectErr *pgconn.ConnectError
	require.ErrorAs(t, err, &connectErr, "the driver's error is kept")
	require.Contains(t, connectErr.Error(), "server refused TLS connection", "which listed the TLS refusal first")
}
