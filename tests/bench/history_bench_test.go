package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// The history benchmark: historyTasks no-op tasks per side and iteration
// over historyAgents agents of e2eCapacity slots each. The history is
// filled in chunks of historyChunk runs per statement.
const (
	historyTasks       = 5_000
	historyAgents      = 2
	historyChunk       = 500_000
	historyDefaultRuns = 10_000_000
	historyMaxRuns     = 100_000_000
)

// historyRuns is how many finished runs BenchmarkLeaseWithHistory puts in
// history: AX_BENCH_HISTORY_RUNS, 10,000,000 by default.
func historyRuns(b *testing.B) int {
	b.Helper()
	s := os.Getenv("AX_BENCH_HISTORY_RUNS")
	if s == "" {
		return historyDefaultRuns
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > historyMaxRuns {
		b.Fatalf("AX_BENCH_HISTORY_RUNS=%q: want a whole number from 1 to %d", s, historyMaxRuns)
	}
	return n
}

// BenchmarkLeaseWithHistory measures what a large history costs the hot
// path: two ax replicas, each on a database of its own with its agents,
// run historyTasks no-op tasks per iteration (fire, lease, run, batched
// complete, and the move of each ended run to history), one on a database
// whose history holds AX_BENCH_HISTORY_RUNS finished single-shard runs,
// the other on one whose history is emptied before each iteration. The
// sides take turns going first.
//
// The history is written with set-based SQL straight into the history
// tables (fillHistory) and then vacuumed and analyzed; the fill is not
// timed by the benchmark but logged. It reports each side's CPU per task
// (this process plus the Postgres backends of the side's database, as in
// BenchmarkEndToEnd: the process's share includes the other side's idle
// agents and loops) and wall time per task, cost-ratio-10M-vs-empty (CPU
// per task, full over empty; goal: at most 1.05; the name keeps "10M"
// whatever AX_BENCH_HISTORY_RUNS is, the log says the size), the same
// ratio of wall time, and bytes-per-run: the table and index bytes of the
// history partitions per run filled, with task_event (a failure's event;
// one run in 20) reported apart and in bytes-per-run-with-events.
func BenchmarkLeaseWithHistory(b *testing.B) {
	runs := historyRuns(b)
	emptyURL := dbtest.NewURL(b)
	// Filled once per process: the runs of -count share it (each adds
	// its few thousand runs to the millions).
	fullURL := dbtest.SharedURL(b, fmt.Sprintf("history-%d", runs), func(url string) {
		filled := time.Now()
		fillHistory(b, url, runs)
		hist, events := historyBytes(b, url)
		b.Logf("history of %d runs filled, vacuumed and analyzed in %s: %d bytes of execution_history + task_history, %d of task_event",
			runs, time.Since(filled).Round(time.Second), hist, events)
		filledBytes[runs] = [2]int64{hist, events}
	})
	hist, events := filledBytes[runs][0], filledBytes[runs][1]

	retireAgents(b, fullURL) // an earlier run's, in the shared database
	empty := &historySide{r: startReplica(b, emptyURL)}
	full := &historySide{r: startReplica(b, fullURL)}
	for _, side := range []*historySide{empty, full} {
		side.r.startAgents(b, historyAgents, e2eCapacity, noop)
		side.r.run(b, e2eWarmUp, nil)
	}
	empty.cpu, full.cpu = newCPUMeter(b, emptyURL), newCPUMeter(b, fullURL)

	var tasks int
	for b.Loop() {
		clearRuns(b, empty.r.pool)
		clearLive(b, full.r.pool)
		if tasks/historyTasks%2 == 0 {
			empty.run(b)
			full.run(b)
		} else {
			full.run(b)
			empty.run(b)
		}
		tasks += historyTasks
	}
	emptyTime, emptyUse, fullTime, fullUse := empty.time, empty.use, full.time, full.use
	perTask := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(tasks) }
	b.ReportMetric(perTask(emptyUse.total()), "empty-cpu-us-per-task")
	b.ReportMetric(perTask(fullUse.total()), "full-cpu-us-per-task")
	b.ReportMetric(perTask(emptyTime), "empty-wall-us-per-task")
	b.ReportMetric(perTask(fullTime), "full-wall-us-per-task")
	b.ReportMetric(float64(fullUse.total())/float64(emptyUse.total()), "cost-ratio-10M-vs-empty")
	b.ReportMetric(float64(fullTime)/float64(emptyTime), "wall-ratio-10M-vs-empty")
	b.ReportMetric(float64(hist)/float64(runs), "bytes-per-run")
	b.ReportMetric(float64(hist+events)/float64(runs), "bytes-per-run-with-events")
	b.Logf("history of %d runs; CPU µs per task, process + Postgres (of which autovacuum): empty %.1f + %.1f (%.1f), full %.1f + %.1f (%.1f)",
		runs, perTask(emptyUse.process), perTask(emptyUse.backends), perTask(emptyUse.autovacuum),
		perTask(fullUse.process), perTask(fullUse.backends), perTask(fullUse.autovacuum))
}

// retireAgents marks every agent of the database at dbURL offline.
func retireAgents(b *testing.B, dbURL string) {
	b.Helper()
	pool, err := db.Open(context.Background(), dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(context.Background(), "UPDATE ax.agent SET state = 'offline'"); err != nil {
		b.Fatal(err)
	}
}

// filledBytes is historyBytes of each shared history just filled, by its
// run count.
var filledBytes = map[int][2]int64{}

// historySide is one side of BenchmarkLeaseWithHistory and what its
// iterations took so far.
type historySide struct {
	r    *axReplica
	cpu  *cpuMeter
	time time.Duration
	use  cpuUsage
}

// run runs historyTasks tasks on the side and adds up their cost.
func (s *historySide) run(b *testing.B) {
	b.Helper()
	t, u := s.r.run(b, historyTasks, s.cpu)
	s.time, s.use = s.time+t, s.use.add(u)
}

// clearLive empties the live tables only (their runs have all moved to
// history by the end of an iteration), so that both sides start each
// iteration with live tables as fresh; history and task_event stay.
func clearLive(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	if _, err := pool.Exec(context.Background(), "TRUNCATE ax.task, ax.execution"); err != nil {
		b.Fatal(err)
	}
}

// fillHistory writes runs finished single-shard runs into the history of
// the database at dbURL, as ax would have left them: an execution and
// its task each (with its lease and, for a success, its end as columns),
// and a failure's event, on 1,000 jobs and 50 agents. One run in 20 failed; the others succeeded. Runs
// ended at a steady rate over the default retentions up to now
// (succeeded: the last 7 days, failed: the last 30), in the order of
// their numbers, so retain_until (end + retention) spreads over the
// partitions from now on as in a server that has run that long.
// Execution ids are time-ordered like the uuid v7 ids ax gives them (48
// bits of the end in ms, then an md5 of the run number), task ids too
// (from the fire, 2 s before the end). Executions, tasks and events are
// written by three connections at once, historyChunk runs per statement;
// then VACUUM ANALYZE.
func fillHistory(b *testing.B, dbURL string, runs int) {
	b.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	// The horizon from now, as maintenance keeps it (the template's
	// partitions start the day it was migrated).
	if _, err := pool.Exec(ctx, "SELECT ax.history_make_partitions(now() + interval '33 days')"); err != nil {
		b.Fatal(err)
	}
	now := time.Now() // one clock for all statements: they compute the same runs
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for _, insert := range []string{fillExecutions, fillTasks, fillEndEvents} {
		wg.Go(func() {
			for lo := 1; lo <= runs; lo += historyChunk {
				hi := min(lo+historyChunk-1, runs)
				if _, err := pool.Exec(ctx, fillRuns+insert, lo, hi, runs, now); err != nil {
					errs <- fmt.Errorf("error filling runs %d to %d: %w", lo, hi, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, "SELECT setval('ax.task_event_id_seq', $1)", 2*runs+2); err != nil {
		b.Fatal(err)
	}
	for _, table := range []string{"ax.execution_history", "ax.task_history", "ax.task_event"} {
		if _, err := pool.Exec(ctx, "VACUUM ANALYZE "+table); err != nil {
			b.Fatal(err)
		}
	}
	var n int
	err = pool.QueryRow(ctx, `SELECT count(*) FROM ax.task_history t JOIN ax.execution_history e
		ON e.id = t.execution_id AND e.finished_at = t.finished_at`).Scan(&n)
	if err != nil {
		b.Fatal(err)
	}
	if n != runs {
		b.Fatalf("%d tasks in history match their execution after filling %d runs", n, runs)
	}
}

// fillRuns computes runs $1 to $2 of $3 ended by $4 (a CTE named run,
// which fillExecutions, fillTasks and the event inserts follow): the same
// figures for the same run number in every statement.
const fillRuns = `
WITH h AS (SELECT made_until FROM ax.history_setting),
n AS (
    SELECT i, i % 20 = 0 AS failed,
           $4::timestamptz - CASE WHEN i % 20 = 0 THEN interval '30 days' ELSE interval '7 days' END
                             * (($3 - i)::float8 / $3) AS finished_at
    FROM generate_series($1::bigint, $2::bigint) i
),
run AS (
    SELECT i, failed, finished_at,
           (lpad(to_hex((extract(epoch FROM finished_at) * 1000)::bigint), 12, '0') || '7'
            || substr(md5('run' || i), 1, 19))::uuid AS execution_id,
           (lpad(to_hex((extract(epoch FROM finished_at) * 1000)::bigint - 2000), 12, '0') || '7'
            || substr(md5('task' || i), 1, 19))::uuid AS task_id,
           md5('job' || i % 1000)::uuid AS job_id,
           md5('agent' || i % 50)::uuid AS agent_id,
           least(finished_at + CASE WHEN failed THEN interval '30 days' ELSE interval '7 days' END,
                 h.made_until - interval '1 microsecond') AS retain_until
    FROM n, h
)
`

const fillExecutions = `
INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, fired_at, misfired, state, params,
    shard_count, priority, started_at, finished_at, created_at, updated_at, error, retain_until)
SELECT execution_id, job_id, CASE WHEN i % 10 = 0 THEN 'manual' ELSE 'schedule' END::ax.execution_cause,
       finished_at - interval '2 seconds', finished_at - interval '2 seconds', false,
       CASE WHEN failed THEN 'failed' ELSE 'succeeded' END::ax.execution_state, '{}',
       1, 0, finished_at - interval '1 second', finished_at,
       finished_at - interval '2 seconds', finished_at,
       CASE WHEN failed THEN 'shard 0 failed: exit status 1' END, retain_until
FROM run`

const fillTasks = `
INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority,
    attempt, max_attempts, timeout_seconds, not_before, started_at, finished_at, result, error,
    created_at, updated_at, agent_id, leased_at, preferred_agent_id, route_key, log_bytes, retain_until,
    worker_host, worker_ip, lease_event_id, end_event_id)
SELECT task_id, execution_id, job_id, 0, 1, '',
       CASE WHEN failed THEN 'failed' ELSE 'succeeded' END::ax.task_state, 0,
       1, 1, 3600, finished_at - interval '2 seconds', finished_at - interval '1 second', finished_at,
       CASE WHEN failed THEN NULL ELSE '{"ok": true}'::jsonb END,
       CASE WHEN failed THEN 'exit status 1' END,
       finished_at - interval '2 seconds', finished_at, agent_id, finished_at - interval '1 second',
       agent_id, '', 0, retain_until,
       'host-' || i % 50, ('10.0.0.' || i % 50)::inet, 2 * i, CASE WHEN NOT failed THEN 2 * i + 1 END
FROM run`

// fillEndEvents writes the failures' outcomes: a lease and a success are
// columns of the task's row (migration 00067; their event ids are 2i and
// 2i + 1, the sequence set past them after the fill).
const fillEndEvents = `
INSERT INTO ax.task_event (id, task_id, execution_id, shard_index, attempt, kind, state, agent_id, message, at,
                           worker_host, worker_ip)
SELECT 2 * i + 1, task_id, execution_id, 0, 1, 'state', 'failed', agent_id, 'exit status 1', finished_at,
       'host-' || i % 50, ('10.0.0.' || i % 50)::inet
FROM run
WHERE failed`

// historyBytes returns the table and index bytes (pg_total_relation_size,
// TOAST included) of the partitions of execution_history and task_history
// together, and of the partitions of task_event, on the database at
// dbURL.
func historyBytes(b *testing.B, dbURL string) (hist, events int64) {
	b.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	err = pool.QueryRow(ctx, `
		SELECT (SELECT sum(pg_total_relation_size(relid))::bigint FROM (
		            SELECT relid FROM pg_partition_tree('ax.execution_history') WHERE isleaf
		            UNION ALL
		            SELECT relid FROM pg_partition_tree('ax.task_history') WHERE isleaf) p),
		       (SELECT sum(pg_total_relation_size(relid))::bigint
		        FROM pg_partition_tree('ax.task_event') WHERE isleaf)`).Scan(&hist, &events)
	if err != nil {
		b.Fatal(err)
	}
	return hist, events
}
