package db_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestOpenPoolSize: the size given wins over the URL's pool_max_conns and
// pool_min_conns, zero keeps them (or DefaultMaxConns, whatever the
// host's CPUs), and sizes that cannot work are refused before
// connecting.
func TestOpenPoolSize(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	// DATABASE_URL may come with or without a query string.
	withParams := func(params ...string) string { return dbtest.WithParams(t, url, params...) }
	for _, tc := range []struct {
		name     string
		url      string
		size     db.PoolSize
		max, min int32
		err      string
	}{
		{name: "default", url: url, max: db.DefaultMaxConns},
		{name: "flags", url: url, size: db.PoolSize{MaxConns: 7, MinConns: 2}, max: 7, min: 2},
		{name: "url", url: withParams("pool_max_conns", "5", "pool_min_conns", "1"), max: 5, min: 1},
		{name: "flags over url", url: withParams("pool_max_conns", "5", "pool_min_conns", "1"), size: db.PoolSize{MaxConns: 9}, max: 9, min: 1},
		{name: "min above max", url: url, size: db.PoolSize{MaxConns: 2, MinConns: 3}, err: "pool min conns 3 is more than the max conns 2"},
		{name: "min above url max", url: withParams("pool_max_conns", "2"), size: db.PoolSize{MinConns: 3},
			err: "pool min conns 3 is more than the max conns 2"},
		{name: "negative max", url: url, size: db.PoolSize{MaxConns: -1}, err: "pool max conns -1 is not between 1 and 1000"},
		{name: "huge max", url: url, size: db.PoolSize{MaxConns: 1001}, err: "pool max conns 1001 is not between 1 and 1000"},
		{name: "negative min", url: url, size: db.PoolSize{MinConns: -1}, err: "pool min conns -1 is negative"},
	} {
		pool, err := db.OpenPool(context.Background(), tc.url, tc.size)
		if tc.err != "" {
			require.EqualError(t, err, tc.err, tc.name)
			continue
		}
		require.NoError(t, err, tc.name)
		cfg := pool.Config()
		pool.Close()
		require.Equal(t, tc.max, cfg.MaxConns, tc.name)
		require.Equal(t, tc.min, cfg.MinConns, tc.name)
	}
}

// TestOpenPoolSessionSettings: every connection of the pool runs with the
// settings OpenPool gives its sessions.
func TestOpenPoolSessionSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.OpenPool(ctx, dbtest.NewURL(t), db.PoolSize{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	for setting, want := range map[string]string{"application_name": "ax", "jit": "off", "backend_flush_after": "256kB"} {
		var got string
		require.NoError(t, pool.QueryRow(ctx, "SELECT current_setting($1)", setting).Scan(&got))
		require.Equal(t, want, got, setting)
	}
}
