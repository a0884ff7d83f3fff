package bench

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
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
// CPU time on these machines moves by ±20 % from run to run of the same
// code (a shared VM), which hides a change worth a few percent. Next to it,
// two figures that the same statements reproduce within a few percent,
// whatever else the machine does, for each step (fire, lease, complete):
//   - STEP-wal-bytes-per-task: the WAL the step wrote (the server's insert
//     position before and after; the server's other databases write
//     too, so run it alone). Each iteration starts after a CHECKPOINT, so
//     that full-page images are written for the same pages every time
//     (without the right to checkpoint, they vary with the server's own);
//   - STEP-blks-per-task: the shared buffers the step's backend read or
//     hit (pg_stat_database of the benchmark's database, flushed at the
//     end of each step), which counts what the statements read as well
//     as what they write;
//   - STEP-heap-rows-per-task and STEP-index-entries-per-task: the row
//     versions written (inserted, updated, HOT or not, deleted) and the
//     b-tree entries inserted, counted from the step's WAL records
//     (pg_walinspect's pg_get_wal_stats, Postgres 15 and later; left out
//     with a log line where the extension cannot be created).
//
// They measure work, not time: a change that saves CPU without saving
// writes or reads (a cheaper plan over the same rows) shows in CPU alone.
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
	w.work = newWorkMeter(b, pool)
	var fire, lease, complete cpuUsage
	var wall time.Duration
	tasks := 0
	for b.Loop() {
		clearRuns(b, pool)
		w.work.checkpoint(b)
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
	w.work.report(b, tasks)
}

// workMeter counts, per step, the WAL written and the shared buffers
// used by the benchmark's one backend (see BenchmarkWritePath).
type workMeter struct {
	pool         *pgxpool.Pool
	canFlush     bool // pg_stat_force_next_flush exists (Postgres 15 and later)
	canInspect   bool // pg_walinspect is there: rows and index entries are counted
	wal, blocks  map[string]int64
	rows, index  map[string]int64
	walAt, blkAt int64 // the counters when the step began
}

func newWorkMeter(b *testing.B, pool *pgxpool.Pool) *workMeter {
	b.Helper()
	ctx := context.Background()
	m := &workMeter{pool: pool, wal: map[string]int64{}, blocks: map[string]int64{},
		rows: map[string]int64{}, index: map[string]int64{}}
	err := pool.QueryRow(ctx,
		"SELECT to_regproc('pg_catalog.pg_stat_force_next_flush') IS NOT NULL").Scan(&m.canFlush)
	if err != nil {
		b.Fatal(err)
	}
	if !m.canFlush {
		b.Log("no pg_stat_force_next_flush (Postgres before 15): blks-per-task lags by up to a second of statistics")
	}
	// In the benchmark's own database, dropped with it.
	if _, err := pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err != nil {
		b.Logf("no pg_walinspect (%v): heap rows and index entries per task are not counted", err)
	} else {
		m.canInspect = true
	}
	return m
}

// checkpoint asks for a checkpoint (requestCheckpoint).
func (m *workMeter) checkpoint(b *testing.B) { requestCheckpoint(b, m.pool) }

var checkpointRefused sync.Once

// requestCheckpoint asks for a checkpoint, so that the full-page images a
// measured phase writes are the same from iteration to iteration; a role
// without the right leaves them to the server's own checkpoints (logged
// once).
func requestCheckpoint(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	_, err := pool.Exec(context.Background(), "CHECKPOINT")
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
	case errors.As(err, &pgErr) && pgErr.Code == "42501": // insufficient_privilege
		checkpointRefused.Do(func() {
			b.Logf("CHECKPOINT refused (%s): the WAL per task varies with the server's checkpoints", pgErr.Message)
		})
	default:
		b.Fatal(err)
	}
}

// read returns the server's WAL insert position and the buffers the
// database's backends used, after flushing this backend's statistics
// (the pool has one connection: the one the steps ran on).
func (m *workMeter) read(b *testing.B) (wal, blocks int64) {
	b.Helper()
	ctx := context.Background()
	if m.canFlush {
		if _, err := m.pool.Exec(ctx, "SELECT pg_stat_force_next_flush()"); err != nil {
			b.Fatal(err)
		}
	}
	err := m.pool.QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn,
		       (SELECT blks_hit + blks_read FROM pg_stat_database WHERE datname = current_database())`).Scan(&wal, &blocks)
	if err != nil {
		b.Fatal(err)
	}
	return wal, blocks
}

func (m *workMeter) begin(b *testing.B) { m.walAt, m.blkAt = m.read(b) }

func (m *workMeter) end(b *testing.B, step string) {
	wal, blocks := m.read(b)
	m.wal[step] += wal - m.walAt
	m.blocks[step] += blocks - m.blkAt
	if m.canInspect {
		rows, entries := m.records(b, m.walAt, wal)
		m.rows[step] += rows
		m.index[step] += entries
	}
}

// records counts, in the WAL between two insert positions, the heap
// records that write a row version or delete one, and the b-tree records
// that insert an entry (a split inserts the entry that caused it).
func (m *workMeter) records(b *testing.B, from, to int64) (rows, entries int64) {
	b.Helper()
	err := m.pool.QueryRow(context.Background(), `
		SELECT coalesce(sum(count) FILTER (WHERE "resource_manager/record_type"
		                   ~ '^Heap/(INSERT|UPDATE|HOT_UPDATE|DELETE)(\+INIT)?$'), 0)::bigint,
		       coalesce(sum(count) FILTER (WHERE "resource_manager/record_type"
		                   ~ '^Btree/(INSERT_LEAF|INSERT_POST|SPLIT_L|SPLIT_R)$'), 0)::bigint
		FROM pg_get_wal_stats('0/0'::pg_lsn + $1::numeric, '0/0'::pg_lsn + $2::numeric, true)`,
		from, to).Scan(&rows, &entries)
	if err != nil {
		b.Fatal(err)
	}
	return rows, entries
}

func (m *workMeter) report(b *testing.B, tasks int) {
	for _, step := range []string{"fire", "lease", "complete"} {
		b.ReportMetric(float64(m.wal[step])/float64(tasks), step+"-wal-bytes-per-task")
		b.ReportMetric(float64(m.blocks[step])/float64(tasks), step+"-blks-per-task")
		if m.canInspect {
			b.ReportMetric(float64(m.rows[step])/float64(tasks), step+"-heap-rows-per-task")
			b.ReportMetric(float64(m.index[step])/float64(tasks), step+"-index-entries-per-task")
		}
	}
}

type writePath struct {
	pool   *pgxpool.Pool
	jobID  uuid.UUID
	agents []uuid.UUID
	work   *workMeter // nil: steps not counted
}

// run fires n runs, leases their tasks and completes them, measuring each
// step with cpu (nil: not measured).
func (w *writePath) run(b *testing.B, n int, cpu *cpuMeter) (fire, lease, complete cpuUsage) {
	b.Helper()
	ctx := context.Background()
	w.begin(b)
	phase := cpu.start(b)
	for done := 0; done < n; done += writeFireBatch {
		err := db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
			now, err := db.Now(ctx, tx)
			if err != nil {
				return err
			}
			execs := make([]*axtype.NewExecution, min(writeFireBatch, n-done))
			for i := range execs {
				execs[i] = &axtype.NewExecution{ID: uuid.Must(uuid.NewV7()), JobID: w.jobID, Cause: axtype.CauseManual, ScheduledFor: now}
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
	w.end(b, "fire")

	// Each lease call's tasks, with the agent each went to: completed
	// together, as the broker coalesces the agents' results.
	type held struct {
		agents []uuid.UUID
		tasks  []*axtype.LeasedTask
	}
	var leased []held
	w.begin(b)
	phase = cpu.start(b)
	for got := 0; got < n; {
		batch := &dispatch.LeaseBatch{Lease: time.Minute, StealAfter: time.Minute, StarveAfter: time.Hour}
		for _, id := range w.agents {
			batch.Agents = append(batch.Agents, axtype.LeaseAgent{ID: id, Executors: []string{"handler"},
				Max: writeLeaseBatch / len(w.agents)})
		}
		out, err := dispatch.LeaseMany(ctx, w.pool, batch)
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
	w.end(b, "lease")

	w.begin(b)
	phase = cpu.start(b)
	for _, h := range leased {
		agents := h.agents
		results := make([]axtype.TaskResult, len(h.tasks))
		for i, t := range h.tasks {
			results[i] = axtype.TaskResult{TaskRef: axtype.TaskRef{ID: t.ID, Token: t.LeaseToken}, State: axtype.TaskSucceeded}
		}
		ended, err := db.WithBatchTxV(ctx, w.pool, len(results), func(tx pgx.Tx) ([]axtype.CompletedTask, error) {
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
	w.end(b, "complete")
	return fire, lease, complete
}

// begin and end count a step with w.work (the warm-up is not counted).
func (w *writePath) begin(b *testing.B) {
	if w.work != nil {
		w.work.begin(b)
	}
}

func (w *writePath) end(b *testing.B, step string) {
	if w.work != nil {
		w.work.end(b, step)
	}
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
