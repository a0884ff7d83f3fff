package e2e

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestDBPoolMetricsUnderLoad runs `ax serve` with an engine pool of 3
// (one held by the notifier) and a request pool of 2, and holds a lock on
// ax.job: each GET /v1/jobs then keeps a request connection while it
// waits, the request pool runs out, and /metrics (which reads the pools
// without a query) still answers, showing both its connections acquired.
// Once the lock goes, the connections come back; the calls that had a
// turn (four: two per request connection) but no connection are counted
// as having waited for one, and the calls beyond the turns as having
// waited for theirs. Each pool's series carry its name.
func TestDBPoolMetricsUnderLoad(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	s := e2ekit.StartServerOn(t, dbURL, "AX_DB_MAX_CONNS=3", "AX_DB_MIN_CONNS=1", "AX_DB_REQUEST_CONNS=2")
	requests := func(name string) string { return name + `{pool="requests"}` }
	before := scrape(t, s.URL)
	require.Equal(t, 3.0, before[`ax_db_pool_max_conns{pool="engine"}`])
	require.Equal(t, 2.0, before[requests("ax_db_pool_max_conns")])
	for _, name := range []string{"ax_db_pool_acquired_conns", "ax_db_pool_idle_conns", "ax_db_pool_empty_acquire_total",
		"ax_db_pool_acquire_duration_seconds_count", "ax_db_pool_acquire_duration_seconds_sum"} {
		require.Contains(t, before, name+`{pool="engine"}`)
		require.Contains(t, before, requests(name))
	}
	get := func() int {
		code, _ := s.API(t, http.MethodGet, "/v1/jobs", nil)
		return code
	}
	require.Equal(t, http.StatusOK, get(), "the key is authenticated (and cached) before the lock")

	ctx := context.Background()
	lock, err := e2ekit.OpenPool(t, dbURL).Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = lock.Rollback(ctx) }()
	_, err = lock.Exec(ctx, "LOCK TABLE ax.job IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	const waiting = 6 // three times the request pool
	codes := make(chan int, waiting)
	var wg sync.WaitGroup
	for range waiting {
		wg.Go(func() { codes <- get() })
	}
	require.Eventually(t, func() bool {
		m := scrape(t, s.URL)
		return m[requests("ax_db_pool_acquired_conns")] == 2 && m[requests("ax_db_pool_idle_conns")] == 0
	}, 30*time.Second, 100*time.Millisecond, "every request connection is taken by a waiting request, and /metrics still answers")
	require.Never(t, func() bool { return len(codes) > 0 }, 300*time.Millisecond, 50*time.Millisecond,
		"no request finishes while ax.job is locked")

	require.NoError(t, lock.Rollback(ctx))
	wg.Wait()
	close(codes)
	for code := range codes {
		require.Equal(t, http.StatusOK, code)
	}
	var after map[string]float64
	require.Eventually(t, func() bool {
		after = scrape(t, s.URL)
		return after[requests("ax_db_pool_acquired_conns")] == 0
	}, 10*time.Second, 100*time.Millisecond, "the connections come back")
	require.Equal(t, 2.0, after[requests("ax_db_pool_idle_conns")], "kept open")
	// Calls take turns, twice as many as the request pool has
	// connections: two of the four with turns waited for a connection,
	// and the two calls beyond the turns waited for theirs.
	require.GreaterOrEqual(t, after[requests("ax_db_pool_empty_acquire_total")], before[requests("ax_db_pool_empty_acquire_total")]+2,
		"the calls with a turn beyond the pool waited for a connection")
	require.Greater(t, after[requests("ax_db_pool_acquire_duration_seconds_sum")], before[requests("ax_db_pool_acquire_duration_seconds_sum")]+0.3,
		"their wait is in the acquire time")
	require.GreaterOrEqual(t, after["ax_api_turn_wait_seconds_count"], before["ax_api_turn_wait_seconds_count"]+waiting,
		"every call took a turn")
	require.Greater(t, after["ax_api_turn_wait_seconds_sum"], before["ax_api_turn_wait_seconds_sum"]+2*0.3,
		"the two calls beyond the four turns waited for theirs")
	require.Equal(t, before["ax_api_turns_refused_total"], after["ax_api_turns_refused_total"], "none refused")
	require.Contains(t, after, `ax_queue_depth{class="none",priority="0"}`, "state gauges are back")
}
