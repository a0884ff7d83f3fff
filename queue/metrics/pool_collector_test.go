package metrics_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// poolEnv is a real pool of two connections whose collector is served at
// /metrics by an HTTP server on loopback.
type poolEnv struct {
	t    *testing.T
	pool *pgxpool.Pool
	url  string
}

func setupPool(t *testing.T) *poolEnv {
	t.Helper()
	t.Parallel()
	pool, err := db.OpenPool(context.Background(), dbtest.NewURL(t), db.PoolSize{MaxConns: 2})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewPoolCollector(pool, "engine"))
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.Cleanup(srv.Close)
	return &poolEnv{t: t, pool: pool, url: srv.URL + "/metrics"}
}

// scrape GETs /metrics and returns each sample by name (each labelled
// as the engine's pool).
func (e *poolEnv) scrape() map[string]float64 {
	e.t.Helper()
	resp, err := http.Get(e.url)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		require.True(e.t, ok, line)
		name, labels, _ := strings.Cut(name, "{")
		require.Contains(e.t, labels, `pool="engine"`, line)
		v, err := strconv.ParseFloat(value, 64)
		require.NoError(e.t, err, line)
		out[name] = v
	}
	require.NoError(e.t, sc.Err())
	return out
}

// hold acquires n connections and returns them.
func (e *poolEnv) hold(n int) []*pgxpool.Conn {
	e.t.Helper()
	conns := make([]*pgxpool.Conn, n)
	for i := range conns {
		c, err := e.pool.Acquire(context.Background())
		require.NoError(e.t, err)
		conns[i] = c
	}
	return conns
}

func release(conns []*pgxpool.Conn) {
	for _, c := range conns {
		c.Release()
	}
}

// TestPoolCollectorFollowsConnectionsInUse: held connections show as
// acquired and come back as idle; acquires that find idle connections do
// not count as empty.
func TestPoolCollectorFollowsConnectionsInUse(t *testing.T) {
	e := setupPool(t)
	release(e.hold(2)) // both connections open and idle: later acquires need not connect
	m := e.scrape()
	require.Equal(t, 2.0, m["ax_db_pool_max_conns"])
	require.Equal(t, 0.0, m["ax_db_pool_acquired_conns"])
	require.Equal(t, 2.0, m["ax_db_pool_idle_conns"])
	require.Equal(t, 2.0, m["ax_db_pool_total_conns"])
	emptyBefore, countBefore := m["ax_db_pool_empty_acquire_total"], m["ax_db_pool_acquire_duration_seconds_count"]

	one := e.hold(1)
	m = e.scrape()
	require.Equal(t, 1.0, m["ax_db_pool_acquired_conns"])
	require.Equal(t, 1.0, m["ax_db_pool_idle_conns"])
	two := e.hold(1)
	m = e.scrape()
	require.Equal(t, 2.0, m["ax_db_pool_acquired_conns"])
	require.Equal(t, 0.0, m["ax_db_pool_idle_conns"])
	require.Equal(t, countBefore+2, m["ax_db_pool_acquire_duration_seconds_count"])
	require.Equal(t, emptyBefore, m["ax_db_pool_empty_acquire_total"], "idle connections were there: no wait")

	release(append(one, two...))
	m = e.scrape()
	require.Equal(t, 0.0, m["ax_db_pool_acquired_conns"])
	require.Equal(t, 2.0, m["ax_db_pool_idle_conns"])
}

// TestPoolCollectorCountsWaitsOfAnExhaustedPool: with every connection
// held, an acquire waits until one is released (counted as an empty
// acquire, its wait in the duration sum) or gives up (counted as
// canceled).
func TestPoolCollectorCountsWaitsOfAnExhaustedPool(t *testing.T) {
	e := setupPool(t)
	held := e.hold(2)
	before := e.scrape()
	require.Equal(t, 2.0, before["ax_db_pool_acquired_conns"])

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := e.pool.Acquire(ctx)
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	m := e.scrape()
	require.Equal(t, before["ax_db_pool_canceled_acquire_total"]+1, m["ax_db_pool_canceled_acquire_total"])
	require.Equal(t, before["ax_db_pool_empty_acquire_total"], m["ax_db_pool_empty_acquire_total"])

	// The waiter says when it calls Acquire, and how long Acquire took
	// as it saw it: the goroutine may start late on a busy machine, so
	// the blocked time is counted from its own start, not the test's.
	got := make(chan *pgxpool.Conn, 1)
	calling := make(chan struct{})
	var callerWait time.Duration
	go func() {
		close(calling)
		start := time.Now()
		c, err := e.pool.Acquire(context.Background())
		callerWait = time.Since(start)
		if err != nil {
			c = nil
		}
		got <- c
	}()
	<-calling
	const blocked = 200 * time.Millisecond
	require.Never(t, func() bool { return len(got) > 0 }, blocked, 10*time.Millisecond,
		"an acquire got a connection from an exhausted pool")
	held[0].Release()
	waiter := <-got
	require.NotNil(t, waiter)
	defer waiter.Release()
	defer held[1].Release()
	require.GreaterOrEqual(t, callerWait, blocked, "the waiter was blocked while Never watched")

	m = e.scrape()
	require.Equal(t, 2.0, m["ax_db_pool_acquired_conns"], "the waiter holds the released connection")
	require.Equal(t, before["ax_db_pool_empty_acquire_total"]+1, m["ax_db_pool_empty_acquire_total"])
	// The pool times the wait inside Acquire, so it is at most what the
	// caller saw and at least the part of it the test held the pool
	// exhausted for; half of that leaves room for the moments between
	// the waiter's signal and its call.
	for _, name := range []string{"ax_db_pool_empty_acquire_wait_seconds_total", "ax_db_pool_acquire_duration_seconds_sum"} {
		counted := m[name] - before[name]
		require.GreaterOrEqual(t, counted, (blocked / 2).Seconds(), name)
		require.LessOrEqual(t, counted, callerWait.Seconds(), name)
	}
}
