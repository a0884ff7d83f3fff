package db_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// Two callers creating the same missing database at once both succeed:
// the CREATE that loses the race finds the other's database (make test
// runs two `ax dev` fuzz targets together, and on a fresh machine one
// failed with a unique violation on pg_database).
func TestCreateDatabaseIfMissingTwiceAtOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := dbtest.NewURL(t)
	name := "ax_race_" + uuid.NewString()[:8]
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		conn, err := pgx.Connect(ctx, url)
		require.NoError(t, err)
		defer conn.Close(ctx)
		wg.Go(func() { errs[i] = db.CreateDatabaseIfMissing(ctx, conn, name, "") })
	}
	wg.Wait()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) }) // after the drop below
	t.Cleanup(func() {
		_, err := conn.Exec(context.Background(), fmt.Sprintf("DROP DATABASE IF EXISTS %s", pgx.Identifier{name}.Sanitize()))
		require.NoError(t, err)
	})
	for i, err := range errs {
		require.NoError(t, err, "caller %d", i)
	}
	var n int
	require.NoError(t, conn.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", name).Scan(&n))
	require.Equal(t, 1, n)
}
