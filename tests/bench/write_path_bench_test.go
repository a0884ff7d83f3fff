package bench

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// The write path's run: writeTasks runs of one shard fired in batches of
// writeFireBatch (as the trigger loop fires a busy second), then leased by
// e2eAgents agents at writeLeaseBatch tasks a call and completed at as
// many results a call (what the lease broker's coalesced statements carry
// in BenchmarkEndToEnd).
const (
	writeTasks      = 10_000
	writeFireBatch  = 500
	writeLeaseBatch = 250
)

// BenchmarkWritePath measures what the database spends on each step of a
// task's life, with nothing else running: no HTTP, no agents, no
// replica's loops; one connection calls the db package's statements as
// the trigger loop and the lease broker do. Its figures are the CPU of
// that connection's backend per task, from /proc (cpuMeter), so they do
// not move with what else the machine is doing, unlike wall time:
//   - fire-pg-us-per-task: recording a fire (the run, its task, routed);
//   - lease-pg-us-per-task: picking and leasing pending tasks;
//   - complete-pg-us-per-task: a success, which ends the run and moves
//     it and its task to history;
//   - pg-us-per-task: the three together, and us-per-task the wall time
//     of all three, the process's share included.
//
// BenchmarkEndToEnd's ax-cpu-us-per-task is this path plus HTTP, the
// agents and the replica's loops; change the statements here first and
// see there what users get.
func BenchmarkWritePath(b *testing.B) {
	dbURL := dbtest.NewURL(b)
	ctx := context.Background()
	// One backend, configured as ax's: the meter counts its CPU alone.
	pool, err := db.OpenPool(ctx, dbURL, db.PoolSize{MaxConns: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	jobID, agents := writePathSetup(b, pool)
	cpu := newCPUMeter(b, dbURL)
	w := &writePath{pool: pool, jobID: jobID, agents: agents}
	w.run(b, writeFireBatch, nil) // warm up plans and caches
	var fire, lease, complete cpuUsage
	var wall time.Duration
	tasks := 0
	for b.Loop() {
		clearRuns(b, pool)
		began := time.Now()
		f, l, c := w.run(b, writeTasks, cpu)
		wall += time.Since(began)
		fire, lease, complete = fire.add(f), lease.add(l), complete.add(c)
		tasks += writeTasks
	}
	perTask := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1000 / float64(tasks) }
	b.ReportMetric(perTask(fire.backends), "fire-pg-us-per-task")
	b.ReportMetric(perTask(lease.backends), "lease-pg-us-per-task")
	b.ReportMetric(perTask(complete.backends), "complete-pg-us-per-task")
	b.ReportMetric(perTask(fire.backends+lease.backends+complete.backends), "pg-us-per-task")
	b.ReportMetric(perTask(wall), "us-per-task")
}

type writePath struct {
	pool   *pgxpool.Pool
	jobID  uuid.UUID
	agents []uuid.UUID
}

// run fires n runs, leases their tasks and completes them, measuring each
// step with cpu (nil: not measured).
func (w *writePath) run(b *testing.B, n int, cpu *cpuMeter) (fire, lease, complete cpuUsage) {
	b.Helper()
	ctx := context.Background()
	phase := cpu.start(b)
	for done := 0; done < n; done += writeFireBatch {
		err := db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
			now, err := db.Now(ctx, tx)
			if err != nil {
				return err
			}
			execs := make([]*db.NewExecution, min(writeFireBatch, n-done))
			for i := range execs {
				execs[i] = &db.NewExecution{ID: uuid.Must(uuid.NewV7()), JobID: w.jobID, Cause: db.CauseManual, ScheduledFor: now}
			}
			_, _, err = db.ExecutionInsertMany(ctx, tx, execs, time.Minute, dispatch.GeneratedShardParams, nil)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	if phase != nil {
		fire = phase.end(b)
	}

	// Each lease call's tasks, with the agent each went to: completed
	// together, as the broker coalesces the agents' results.
	type held struct {
		agents []uuid.UUID
		tasks  []*db.LeasedTask
	}
	var leased []held
	phase = cpu.start(b)
	for got := 0; got < n; {
		batch := &db.TaskLeaseBatch{Lease: time.Minute, StealAfter: time.Minute, StarveAfter: time.Hour}
		for _, id := range w.agents {
			batch.Agents = append(batch.Agents, db.LeaseAgent{ID: id, Executors: []string{"handler"},
				Max: writeLeaseBatch / len(w.agents)})
		}
		out, err := db.TaskLeaseMany(ctx, w.pool, batch)
		if err != nil {
			b.Fatal(err)
		}
		var h held
		for i, tasks := range out {
			for _, t := range tasks {
				h.agents = append(h.agents, batch.Agents[i].ID)
				h.tasks = append(h.tasks, t)
			}
		}
		count := len(h.tasks)
		leased = append(leased, h)
		if count == 0 {
			b.Fatalf("%d of %d tasks leased, then none", got, n)
		}
		got += count
	}
	if phase != nil {
		lease = phase.end(b)
	}

	phase = cpu.start(b)
	for _, h := range leased {
		agents := h.agents
		results := make([]db.TaskResult, len(h.tasks))
		for i, t := range h.tasks {
			results[i] = db.TaskResult{TaskRef: db.TaskRef{ID: t.ID, Token: t.LeaseToken}, State: db.TaskSucceeded}
		}
		ended, err := db.WithBatchTxV(ctx, w.pool, len(results), func(tx pgx.Tx) ([]db.CompletedTask, error) {
			return db.TaskCompleteByAgents(ctx, tx, agents, results, nil)
		})
		if err != nil {
			b.Fatal(err)
		}
		if len(ended) != len(results) {
			b.Fatalf("%d of %d results recorded", len(ended), len(results))
		}
	}
	if phase != nil {
		complete = phase.end(b)
	}
	return fire, lease, complete
}

// writePathSetup makes the job the runs are of (a handler, any agent) and
// e2eAgents agents that take it.
func writePathSetup(b *testing.B, pool *pgxpool.Pool) (uuid.UUID, []uuid.UUID) {
	b.Helper()
	ctx := context.Background()
	var keyID, jobID uuid.UUID
	err := pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('write-path', sha256('write-path'), 'ax_wp', '{agent}') RETURNING id`).Scan(&keyID)
	if err != nil {
		b.Fatal(err)
	}
	err = pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		VALUES ('write-path', 'manual', 'handler', '{"kind": "handler", "handler": "noop"}', false) RETURNING id`).Scan(&jobID)
	if err != nil {
		b.Fatal(err)
	}
	agents := make([]uuid.UUID, e2eAgents)
	for i := range agents {
		err := pool.QueryRow(ctx, `INSERT INTO ax.agent (id, name, capacity, api_key_id, executors)
			VALUES (gen_random_uuid(), $1, $2, $3, '{handler}') RETURNING id`,
			"write-path-"+uuid.NewString()[:8], e2eCapacity, keyID).Scan(&agents[i])
		if err != nil {
			b.Fatal(err)
		}
	}
	return jobID, agents
}
