package bench

import (
	"context"
	"testing"
	"time"

	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// BenchmarkLeaseWithConcurrencyKeys measures what concurrency keys cost
// the lease path: 4 leasers (the broker's Lease) take 1,000 tasks of a job
// whose tasks have 1,000 keys of limit 1 (10 tasks a key, as seedTasks
// makes a run of 10,000 shards: 9,000 stay behind their key's limit, in
// the way of the scan), and 1,000 of 10,000 tasks without keys, on the
// same database in the same run, 100 tasks per lease call. It reports
// both rates and ratio (time a keyed task costs over an unkeyed one;
// goal: at most 1.3).
func BenchmarkLeaseWithConcurrencyKeys(b *testing.B) {
	const keys, perKey, leasers, batch = 1_000, 3, 4, 100 // perKey: at least; see above
	ctx := context.Background()
	pool := dbtest.New(b)
	agents := seedAgents(b, pool, leasers)
	broker := dispatch.NewLeaseBroker(pool, nil, dispatch.AgentConfig{Lease: time.Minute, StarveAfter: time.Hour}, nil, nil)
	// Leaves no pending task behind for the next phase.
	clear := func() {
		if _, err := pool.Exec(ctx, `UPDATE ax.task SET state = 'cancelled', finished_at = now() WHERE state = 'pending'`); err != nil {
			b.Fatal(err)
		}
	}
	var unkeyed, keyed float64
	for b.Loop() {
		seedTasks(b, pool, keys*perKey, "")
		free := drainRate(b, broker, agents, keys, batch)
		clear()
		seedTasks(b, pool, keys*perKey, "")
		// The new job's tasks get keys: shard i has key i mod 1,000, in
		// the job's own scope (a new job each round: the keys of the last
		// round's leased tasks are not in the way).
		if _, err := pool.Exec(ctx, `UPDATE ax.task
			SET concurrency_scope = 'job:' || job_id, concurrency_key = 'customer=' || (shard_index % $1), concurrency_limit = 1
			WHERE state = 'pending'`, keys); err != nil {
			b.Fatal(err)
		}
		if _, err := pool.Exec(ctx, `VACUUM ANALYZE ax.task`); err != nil {
			b.Fatal(err)
		}
		held := drainRate(b, broker, agents, keys, batch)
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
		unkeyed, keyed = unkeyed+free, keyed+held
	}
	n := float64(b.N)
	b.ReportMetric(unkeyed/n, "unkeyed-tasks/s")
	b.ReportMetric(keyed/n, "keyed-tasks/s")
	b.ReportMetric(unkeyed/keyed, "ratio")
}
