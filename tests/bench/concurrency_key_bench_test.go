package bench

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// BenchmarkLeaseWithConcurrencyKeys measures what concurrency keys cost
// the lease path: 4 leasers (the broker's Lease, 100 tasks a call, with a
// notifier as in ax serve) take 1,000 tasks of 10 runs of 1,000 shards,
// once of a job without a key and once of a job keyed by shard index
// with limit 1 (1,000 keys, one task of each run a key: 9,000 tasks wait
// behind their key's limit, parked as the product parks them), on the
// same database in the same round, after a round that warms both
// (caches, plans). Both take their tasks from the same runs in the same
// order, so only the keys differ. Every round leaves its leased tasks
// leased, so later rounds lease beside more running keyed tasks. It
// reports both rates and ratio (time a keyed task costs over an unkeyed
// one; goal: at most 1.3).
func BenchmarkLeaseWithConcurrencyKeys(b *testing.B) {
	const runs, shards, leasers, batch = 10, 1_000, 4, 100
	ctx := context.Background()
	pool := dbtest.New(b)
	agents := seedAgents(b, pool, leasers)
	// With a notifier, as in ax serve: a lease unparks keyed tasks only
	// when a key freed a place (its notification) or every second.
	notifier := notify.NewNotifier(pool, nil, notify.ServeChannels()...)
	if err := notifier.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(notifier.Stop)
	broker := dispatch.NewLeaseBroker(pool, notifier, dispatch.AgentConfig{Lease: time.Minute, StarveAfter: time.Hour}, nil, nil)
	// Leaves no pending task behind for the next phase.
	clear := func() {
		if _, err := pool.Exec(ctx, `UPDATE ax.task SET state = 'cancelled', finished_at = now() WHERE state = 'pending'`); err != nil {
			b.Fatal(err)
		}
	}
	round := func() (free, held float64) {
		seedKeyedRuns(b, pool, runs, shards, false)
		free = drainRate(b, broker, agents, shards, batch)
		clear()
		seedKeyedRuns(b, pool, runs, shards, true)
		held = drainRate(b, broker, agents, shards, batch)
		var over int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM ax.task
			WHERE concurrency_key IS NOT NULL AND state IN ('leased', 'running')
			GROUP BY concurrency_scope, concurrency_key HAVING count(*) > 1) x`).Scan(&over); err != nil {
			b.Fatal(err)
		}
		if over > 0 {
			b.Fatalf("%d keys have more than 1 task leased", over)
		}
		clear()
		return free, held
	}
	round()
	var unkeyed, keyed float64
	for b.Loop() {
		free, held := round()
		unkeyed, keyed = unkeyed+free, keyed+held
	}
	n := float64(b.N)
	b.ReportMetric(unkeyed/n, "unkeyed-tasks/s")
	b.ReportMetric(keyed/n, "keyed-tasks/s")
	b.ReportMetric(unkeyed/keyed, "ratio")
}

// seedKeyedRuns fires runs runs of a new job of shards shards each;
// keyed, the job's concurrency key is the shard index with limit 1 (the
// tasks are parked as the product parks them).
func seedKeyedRuns(b testing.TB, pool *pgxpool.Pool, runs, shards int, keyed bool) {
	b.Helper()
	ctx := context.Background()
	key, limit := "", any(nil)
	if keyed {
		key, limit = "shard={{.shard.index}}", 1
	}
	var jobID uuid.UUID
	err := pool.QueryRow(ctx, `
		WITH j AS (
			INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, shard_count, agentless,
			                    concurrency_key, concurrency_limit)
			VALUES ('lease-bench-' || gen_random_uuid(), 'manual', 'shell', '{"command":"true"}', $1, false, $2, $3)
			RETURNING id)
		INSERT INTO ax.trigger (job_id) SELECT id FROM j RETURNING job_id`, shards, key, limit).Scan(&jobID)
	if err != nil {
		b.Fatal(err)
	}
	render := (*dispatch.TaskRouter)(nil).RouteFunc(pool) // renders the keys, routes nothing
	execs := make([]*axtype.NewExecution, runs)
	for i := range execs {
		execs[i] = &axtype.NewExecution{ID: uuid.New(), JobID: jobID, Cause: axtype.CauseManual,
			ScheduledFor: time.Now().Add(-time.Second)}
	}
	if _, _, err := db.ExecutionInsertMany(ctx, pool, execs, time.Minute, dispatch.GeneratedShardParams, render); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE ax.task`); err != nil {
		b.Fatal(err)
	}
}
