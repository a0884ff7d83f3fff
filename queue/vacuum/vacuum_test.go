package vacuum_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/vacuum"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

// setup is a fresh database with two tables of ax's schema of its own:
// churned (rows inserted, then most deleted) and kept (rows inserted, a
// few deleted).
func setup(t *testing.T) *pgxpool.Pool {
	t.Helper()
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	for _, sql := range []string{
		"CREATE TABLE ax.churned (id int PRIMARY KEY) WITH (autovacuum_enabled = false)", // the test vacuums, not autovacuum
		"CREATE TABLE ax.kept (id int PRIMARY KEY) WITH (autovacuum_enabled = false)",
		"INSERT INTO ax.churned SELECT generate_series(1, 5000)",
		"INSERT INTO ax.kept SELECT generate_series(1, 50000)",
		"DELETE FROM ax.churned WHERE id > 100",
		"DELETE FROM ax.kept WHERE id <= 2000",
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	// The statistics a backend gathers reach the shared counts when it
	// flushes them: make it now, on every connection that wrote.
	for _, c := range pool.AcquireAllIdle(ctx) {
		_, err := c.Exec(ctx, "SELECT pg_stat_force_next_flush()")
		require.NoError(t, err)
		c.Release()
	}
	return pool
}

func dead(t *testing.T, pool *pgxpool.Pool, table string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT n_dead_tup FROM pg_stat_user_tables WHERE schemaname = 'ax' AND relname = $1", table).Scan(&n))
	return n
}

// A table whose dead rows pass both thresholds is vacuumed; one whose dead
// rows are few next to its live ones is left to autovacuum; a second pass
// finds nothing left to do.
func TestPassVacuumsTheTablesOverTheThresholds(t *testing.T) {
	pool := setup(t)
	require.Equal(t, int64(4900), dead(t, pool, "churned"))
	require.Equal(t, int64(2000), dead(t, pool, "kept"))

	v := vacuum.New(pool, vacuum.Config{Tables: []string{"churned", "kept", "missing"}})
	n, err := v.Pass(context.Background())
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, dead(t, pool, "churned"), "vacuumed")
	require.Equal(t, int64(2000), dead(t, pool, "kept"), "2,000 dead of 48,000 live is under the share")

	n, err = v.Pass(context.Background())
	require.NoError(t, err)
	require.Zero(t, n)
}

// The default tables are ax's own: every one exists in the migrated
// schema, so none is silently skipped.
func TestHotTablesExist(t *testing.T) {
	pool := setup(t)
	for _, table := range vacuum.HotTables {
		var exists bool
		require.NoError(t, pool.QueryRow(context.Background(),
			"SELECT to_regclass('ax.' || $1) IS NOT NULL", table).Scan(&exists))
		require.True(t, exists, table)
	}
	v := vacuum.New(pool, vacuum.Config{})
	_, err := v.Pass(context.Background())
	require.NoError(t, err)
}
