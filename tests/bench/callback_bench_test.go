package bench

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// callbacksPerRun is how many executions end at once in BenchmarkCallbacks.
const callbacksPerRun = 5000

// BenchmarkCallbacks: 5,000 executions of a job with a callback URL end
// in one statement (the trigger writes their outbox rows); the clock runs
// from enqueuing their delivery jobs (Outbox.Flush, 1,000 per
// transaction) until every callback is recorded as delivered to a local
// receiver by one replica's River workers (100 at once), each signed and
// sent over a real loopback connection; connections is how many the
// receiver accepted (kept alive, they are reused).
func BenchmarkCallbacks(b *testing.B) {
	var received atomic.Int64
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	var conns atomic.Int64
	rcv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	defer rcv.Close()
	for b.Loop() {
		b.StopTimer()
		pool := benchPool(b)
		rs := startCallbackRiver(b, pool)
		endExecutions(b, pool, rcv.URL, callbacksPerRun)
		b.StartTimer()
		conns.Store(0)
		start := time.Now()
		flushAll(b, pool, rs.Outbox())
		waitDelivered(b, pool, callbacksPerRun)
		elapsed := time.Since(start)
		rs.Stop()
		b.ReportMetric(callbacksPerRun/elapsed.Seconds(), "callbacks/s")
		b.ReportMetric(float64(conns.Load()), "connections")
	}
	if got := received.Load(); got < int64(b.N*callbacksPerRun) {
		b.Fatalf("receiver got %d requests for %d callbacks", got, b.N*callbacksPerRun)
	}
}

func startCallbackRiver(b *testing.B, pool *pgxpool.Pool) *delivery.RiverService {
	b.Helper()
	rs, err := delivery.NewRiverService(pool, delivery.RiverConfig{Policy: outbound.Policy{AllowLoopback: true}})
	if err != nil {
		b.Fatal(err)
	}
	if err := rs.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return rs
}

// endExecutions makes n executions of one job with a callback URL and
// cancels them all in one statement.
func endExecutions(b *testing.B, pool *pgxpool.Pool, url string, n int) {
	b.Helper()
	job, err := queue.NewJobService(pool, nil).Create(context.Background(), &axtype.Job{Name: "bench-callbacks",
		Group: "default", TriggerKind: axtype.TriggerManual, Timezone: "UTC", ExecutorKind: "shell",
		Executor: axtype.ExecutorConfig{Command: "true"}, RouteStrategy: "round_robin", ShardCount: 1, TimeoutSeconds: 60,
		RetryMaxAttempts: 1, ConcurrencyPolicy: "allow", MisfirePolicy: "fire_once", MisfireWindowSeconds: 60,
		MisfireMaxFires: 1, DegradeAction: "wait", ShardRangeTo: axtype.DefaultShardRangeTo, CallbackURL: url})
	if err != nil {
		b.Fatal(err)
	}
	_, err = pool.Exec(context.Background(), `
		WITH e AS (
			INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
			SELECT gen_random_uuid(), $1, 'manual', now(), 1, 0 FROM generate_series(1, $2)
			RETURNING id)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds, state,
		                     finished_at)
		SELECT id, $1, 0, 1, 0, 1, 60, 'cancelled', now() FROM e`, job.ID, n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `UPDATE ax.execution SET state = 'cancelled', finished_at = now()
		WHERE job_id = $1`, job.ID); err != nil {
		b.Fatal(err)
	}
}

// flushAll enqueues every callback the outbox holds.
func flushAll(b *testing.B, pool *pgxpool.Pool, outbox *delivery.Outbox) {
	b.Helper()
	ctx := context.Background()
	for {
		var left int
		err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			if err := outbox.Flush(ctx, tx); err != nil {
				return err
			}
			return tx.QueryRow(ctx, "SELECT count(*) FROM ax.callback WHERE enqueued_at IS NULL").Scan(&left)
		})
		if err != nil {
			b.Fatal(err)
		}
		if left == 0 {
			return
		}
	}
}

func waitDelivered(b *testing.B, pool *pgxpool.Pool, n int) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var delivered int
		if err := pool.QueryRow(context.Background(),
			"SELECT count(*) FROM ax.callback WHERE state = 'delivered'").Scan(&delivered); err != nil {
			b.Fatal(err)
		}
		if delivered == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d callbacks delivered after 5 minutes", delivered, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// benchPool is a pool of 20 connections: the default (4 on 2 cores) would
// measure waiting for a connection, not delivering.
func benchPool(b *testing.B) *pgxpool.Pool {
	b.Helper()
	pool, err := db.Open(context.Background(), dbtest.WithParams(b, dbtest.NewURL(b), "pool_max_conns", "20"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}
