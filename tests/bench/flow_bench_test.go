package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// BenchmarkLeaseWithRateLimit measures what a rate class costs the lease
// path: 4 leasers (the broker's own Lease, as the API calls it) drain
// 20,000 ready tasks of a class whose bucket never runs dry, and 20,000 of
// a job without a class, on the same database in the same run, 100 tasks
// per lease call. The limited side also takes tokens from the class's
// bucket row and gives back the unused ones on each call. It reports both
// rates and ratio-limited-vs-unlimited (goal: at least 0.9).
func BenchmarkLeaseWithRateLimit(b *testing.B) {
	const tasks, leasers, batch = 20_000, 4, 100
	ctx := context.Background()
	pool := dbtest.New(b)
	agents := seedAgents(b, pool, leasers)
	broker := dispatch.NewLeaseBroker(pool, nil, dispatch.AgentConfig{Lease: time.Minute, StarveAfter: time.Hour}, nil, nil)
	_, err := pool.Exec(ctx, `INSERT INTO ax.rate_class (name, rate, burst, tokens) VALUES ('wide', 1e9, 1e9, 1e9)`)
	if err != nil {
		b.Fatal(err)
	}
	var unlimited, limited float64
	for b.Loop() {
		seedTasks(b, pool, tasks, "")
		free := drainRate(b, broker, agents, tasks, batch)
		seedTasks(b, pool, tasks, "wide")
		capped := drainRate(b, broker, agents, tasks, batch)
		unlimited, limited = unlimited+free, limited+capped
	}
	n := float64(b.N)
	b.ReportMetric(unlimited/n, "unlimited-tasks/s")
	b.ReportMetric(limited/n, "limited-tasks/s")
	b.ReportMetric(limited/unlimited, "ratio-limited-vs-unlimited")
}

// seedAgents registers n active, ready agents and returns them.
func seedAgents(b testing.TB, pool *pgxpool.Pool, n int) []*axtype.Agent {
	b.Helper()
	ctx := context.Background()
	var keyID uuid.UUID
	err := pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('bench', sha256(gen_random_uuid()::text::bytea), 'ax_bench', '{agent}') RETURNING id`).Scan(&keyID)
	if err != nil {
		b.Fatal(err)
	}
	agents := make([]*axtype.Agent, n)
	for i := range agents {
		a, err := db.AgentInsert(ctx, pool, &axtype.Agent{ID: uuid.New(), Name: fmt.Sprintf("leaser-%d", i),
			Capacity: 10_000, APIKeyID: keyID, Executors: []string{"shell", "http", "handler"}})
		if err != nil {
			b.Fatal(err)
		}
		ready := true
		if _, err := db.AgentHeartbeat(ctx, pool, a.ID, &axtype.AgentLoad{Ready: &ready}, nil); err != nil {
			b.Fatal(err)
		}
		if agents[i], err = db.AgentGetByID(ctx, pool, a.ID); err != nil {
			b.Fatal(err)
		}
	}
	return agents
}

// seedTasks makes n ready, unassigned tasks of a new manual job in class
// ("" for none), in executions of 10,000 shards.
func seedTasks(b *testing.B, pool *pgxpool.Pool, n int, class string) {
	b.Helper()
	ctx := context.Background()
	var jobID uuid.UUID
	err := pool.QueryRow(ctx, `
		WITH j AS (
			INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, rate_limit_class, shard_count, agentless)
			VALUES ('lease-bench-' || gen_random_uuid(), 'manual', 'shell', '{"command":"true"}', nullif($1, ''), 10000, false)
			RETURNING id)
		INSERT INTO ax.trigger (job_id) SELECT id FROM j RETURNING job_id`, class).Scan(&jobID)
	if err != nil {
		b.Fatal(err)
	}
	var execs []*axtype.NewExecution
	for range (n + 9_999) / 10_000 {
		execs = append(execs, &axtype.NewExecution{ID: uuid.New(), JobID: jobID, Cause: axtype.CauseManual,
			ScheduledFor: time.Now().Add(-time.Second)})
	}
	if _, _, err := db.ExecutionInsertMany(ctx, pool, execs, time.Minute, dispatch.GeneratedShardParams, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE ax.task`); err != nil {
		b.Fatal(err)
	}
}

// drainRate leases want tasks with one leaser per agent, batch at a time,
// and returns tasks leased per second. The leasers ask for no more than
// want in all (a call asks for what is left, at most batch): the rate of
// a drain that runs out at want is not compared with one whose last
// calls went on to lease more.
func drainRate(b testing.TB, broker *dispatch.LeaseBroker, agents []*axtype.Agent, want, batch int) float64 {
	b.Helper()
	ctx := context.Background()
	var asked, leased atomic.Int64 // asked: tasks asked for by calls made or in flight, less what they did not get
	var wg sync.WaitGroup
	errs := make(chan error, len(agents))
	start := time.Now()
	for _, agent := range agents {
		wg.Go(func() {
			empties := 0
			for {
				n := min(int64(batch), int64(want)-asked.Add(int64(batch))+int64(batch))
				if n <= 0 {
					asked.Add(-int64(batch))
					return
				}
				asked.Add(n - int64(batch))
				got, err := broker.Lease(ctx, agent, int(n), 0)
				if err != nil {
					errs <- err
					return
				}
				asked.Add(int64(len(got)) - n)
				if len(got) == 0 {
					// Tasks the other leasers hold locked (or, keyed,
					// lose to them under a key's lock) are not this one's
					// to take: it stops after a few empty calls.
					if empties++; empties == 3 {
						return
					}
					continue
				}
				empties = 0
				leased.Add(int64(len(got)))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if leased.Load() < int64(want) {
		b.Fatalf("leased %d of %d tasks", leased.Load(), want)
	}
	return float64(leased.Load()) / elapsed.Seconds()
}
