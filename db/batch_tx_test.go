package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestBatchTx: a statement run in WithBatchTxV for a small batch is
// planned once, generically, however often it runs (pg_prepared_statements
// counts the plans of the connection's prepared statements); for a large
// batch, and outside it, the connection plans as before; in a transaction
// given to it (a savepoint) the setting holds until that transaction ends.
func TestBatchTx(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.OpenPool(ctx, dbtest.NewURL(t), db.PoolSize{MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	const byKeys = "SELECT count(*) FROM ax.task WHERE id = ANY($1::uuid[])"
	keys := []uuid.UUID{uuid.New(), uuid.New()}
	for range 12 {
		n, err := db.WithBatchTxV(ctx, pool, db.SmallBatch, func(tx pgx.Tx) (int, error) {
			var mode string
			if err := tx.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode); err != nil {
				return 0, err
			}
			require.Equal(t, "force_generic_plan", mode)
			if err := tx.QueryRow(ctx, "SHOW enable_seqscan").Scan(&mode); err != nil {
				return 0, err
			}
			require.Equal(t, "off", mode, "read by index")
			var n int
			return n, tx.QueryRow(ctx, byKeys, keys).Scan(&n)
		})
		require.NoError(t, err)
		require.Zero(t, n)
	}
	var generic, custom int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement = $1`, byKeys).Scan(&generic, &custom))
	require.Equal(t, int64(12), generic, "every run used the generic plan")
	require.Zero(t, custom, "none was planned for its values")

	var mode string
	require.NoError(t, pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "auto", mode, "the setting ended with the transaction")
	_, err = db.WithBatchTxV(ctx, pool, db.SmallBatch+1, func(tx pgx.Tx) (struct{}, error) {
		return struct{}{}, tx.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode)
	})
	require.NoError(t, err)
	require.Equal(t, "auto", mode, "a large batch is planned for its values")

	require.NoError(t, db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := db.WithBatchTxV(ctx, tx, 1, func(tx pgx.Tx) (struct{}, error) { return struct{}{}, nil })
		require.NoError(t, err)
		require.NoError(t, tx.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
		require.Equal(t, "force_generic_plan", mode, "within the outer transaction, after the savepoint")
		return nil
	}))
	require.NoError(t, pool.QueryRow(ctx, "SHOW plan_cache_mode").Scan(&mode))
	require.Equal(t, "auto", mode)
}
