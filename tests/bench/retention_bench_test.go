package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue/history"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// Shape of BenchmarkRetentionDrop: runs in the partition dropped, the
// backlog of pending tasks kept while it is dropped, and the windows
// compared.
const (
	dropAgents   = 4
	dropCapacity = 50
	dropRuns     = 1_000_000
	dropBacklog  = 2_000
	dropBaseline = 3 * time.Second
	dropAfter    = 200 * time.Millisecond
)

// BenchmarkRetentionDrop measures what removing a day of history costs
// the hot path: one replica with dropAgents agents of dropCapacity slots
// leasing and completing no-op tasks at full speed (a backlog of dropBacklog pending
// tasks is kept, so every lease finds work at once and never waits in its
// long poll), and a passed history partition holding dropRuns finished
// runs (an execution and a task each), which history.Maintain (the
// maintenance job's pass) drops. The agents' lease and complete calls are
// timed at the server over dropBaseline before the pass, and while the
// partitions are detached and dropped (and dropAfter after).
//
// Reports drop-seconds (the drop transaction, which locks the history
// tables; goal < 1), maintain-seconds (the whole pass, including counting
// the partition's rows first), lease-p99-ratio-during-drop (p99 of the
// leases that overlap the drop over p99 of the baseline's; goal <= 1.5),
// the same for completes (each completion moves its run to history, the
// write the drop's lock holds up), and the p99s and sample counts.
func BenchmarkRetentionDrop(b *testing.B) {
	dbURL := dbtest.NewURL(b)
	r := startReplica(b, dbURL)
	r.startAgents(b, dropAgents, dropCapacity, noop)
	r.run(b, e2eWarmUp, nil)
	cfg := history.Config{Logger: benchLogger()}

	var n int
	var dropTime, passTime time.Duration
	var baseLease, duringLease, baseComplete, duringComplete []time.Duration
	for b.Loop() {
		n++
		fillPassedPartition(b, r.pool, n, dropRuns)
		stop := r.keepBacklog(b, dropBacklog)
		time.Sleep(time.Second) // the backlog builds up
		r.requests.record()
		time.Sleep(dropBaseline)
		began := time.Now()
		rep, err := history.Maintain(context.Background(), r.pool, cfg)
		ended := time.Now()
		time.Sleep(dropAfter)
		calls := r.requests.stop()
		stop()
		if err != nil {
			b.Fatal(err)
		}
		if rep.Dropped["execution_history"] != dropRuns || rep.Dropped["task_history"] != dropRuns {
			b.Fatalf("dropped %v, want %d runs (report %+v)", rep.Dropped, dropRuns, rep)
		}
		dropTime += rep.DropTime
		passTime += ended.Sub(began)
		for _, c := range calls {
			during := false
			for _, d := range rep.DropSpans {
				during = during || (c.start.Before(d.To.Add(dropAfter)) && c.start.Add(c.took).After(d.From))
			}
			base := c.start.Add(c.took).Before(began)
			switch {
			case c.lease && during:
				duringLease = append(duringLease, c.took)
			case c.lease && base:
				baseLease = append(baseLease, c.took)
			case during:
				duringComplete = append(duringComplete, c.took)
			case base:
				baseComplete = append(baseComplete, c.took)
			}
		}
		b.Logf("pass %d: maintenance pass %s, of which detach + drop %s, for %d runs; %d leases and %d completes during the drop",
			n, ended.Sub(began).Round(time.Millisecond), rep.DropTime.Round(time.Millisecond), dropRuns,
			len(duringLease), len(duringComplete))
	}
	b.ReportMetric(dropTime.Seconds()/float64(n), "drop-seconds")
	b.ReportMetric(passTime.Seconds()/float64(n), "maintain-seconds")
	b.ReportMetric(percentileMillis(duringLease, 0.99)/percentileMillis(baseLease, 0.99), "lease-p99-ratio-during-drop")
	b.ReportMetric(percentileMillis(duringComplete, 0.99)/percentileMillis(baseComplete, 0.99), "complete-p99-ratio-during-drop")
	b.ReportMetric(percentileMillis(baseLease, 0.99), "lease-p99-ms-before")
	b.ReportMetric(percentileMillis(duringLease, 0.99), "lease-p99-ms-during")
	b.ReportMetric(percentileMillis(baseComplete, 0.99), "complete-p99-ms-before")
	b.ReportMetric(percentileMillis(duringComplete, 0.99), "complete-p99-ms-during")
	b.ReportMetric(float64(len(duringLease))/float64(n), "leases-during")
	b.ReportMetric(float64(len(baseLease))/float64(n), "leases-before")
}

// fillPassedPartition makes a partition of each history table whose range
// (of retain_until) passed long ago, named for pass n, and writes runs
// finished single-shard runs into it: what a day of history is when its
// retention has passed.
func fillPassedPartition(b *testing.B, pool *pgxpool.Pool, n, runs int) {
	b.Helper()
	ctx := context.Background()
	from := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).AddDate(0, 0, n)
	to := from.AddDate(0, 0, 1)
	exec, task := fmt.Sprintf("execution_h_bench%d", n), fmt.Sprintf("task_h_bench%d", n)
	for _, stmt := range []string{
		fmt.Sprintf(`CREATE TABLE ax.%s PARTITION OF ax.execution_history FOR VALUES FROM ('%s') TO ('%s')`,
			exec, from.Format(time.RFC3339), to.Format(time.RFC3339)),
		fmt.Sprintf(`CREATE INDEX ON ax.%s (id)`, exec),
		fmt.Sprintf(`CREATE INDEX ON ax.%s (job_id, finished_at DESC)`, exec),
		fmt.Sprintf(`CREATE TABLE ax.%s PARTITION OF ax.task_history FOR VALUES FROM ('%s') TO ('%s')`,
			task, from.Format(time.RFC3339), to.Format(time.RFC3339)),
		fmt.Sprintf(`CREATE INDEX ON ax.%s (id)`, task),
		fmt.Sprintf(`CREATE INDEX ON ax.%s (execution_id, shard_index)`, task),
	} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			b.Fatal(err)
		}
	}
	const runsSQL = `
WITH run AS (
    SELECT i, $2::timestamptz + (i::float8 / $1) * interval '1 day' - interval '7 days' AS finished_at,
           $2::timestamptz + (i::float8 / $1) * interval '1 day' AS retain_until,
           (lpad(to_hex((extract(epoch FROM $2::timestamptz) * 1000)::bigint + i), 12, '0') || '7'
            || substr(md5('run' || i || $3::int), 1, 19))::uuid AS execution_id,
           md5('task' || i || $3::int)::uuid AS task_id,
           md5('job' || i % 1000)::uuid AS job_id,
           md5('agent' || i % 50)::uuid AS agent_id
    FROM generate_series(0, $1::int - 1) i
)`
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for _, insert := range []string{`
INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, fired_at, misfired, state, params,
    shard_count, priority, started_at, finished_at, created_at, updated_at, retain_until)
SELECT execution_id, job_id, 'schedule', finished_at - interval '2 seconds', finished_at - interval '2 seconds', false,
       'succeeded', '{}', 1, 0, finished_at - interval '1 second', finished_at,
       finished_at - interval '2 seconds', finished_at, retain_until
FROM run`, `
INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, shard_param, state, priority,
    attempt, max_attempts, timeout_seconds, not_before, started_at, finished_at, result,
    created_at, updated_at, agent_id, leased_at, preferred_agent_id, route_key, log_bytes, retain_until)
SELECT task_id, execution_id, job_id, 0, 1, '', 'succeeded', 0, 1, 1, 3600, finished_at - interval '2 seconds',
       finished_at - interval '1 second', finished_at, '{"ok": true}', finished_at - interval '2 seconds', finished_at,
       agent_id, finished_at - interval '1 second', agent_id, '', 0, retain_until
FROM run`} {
		wg.Go(func() {
			if _, err := pool.Exec(ctx, runsSQL+insert, runs, from, n); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("error filling the passed partition: %v", err)
	}
}

// keepBacklog fires runs of the bench job whenever fewer than backlog
// tasks are pending, until the returned stop is called (which waits for
// it to stop).
func (r *axReplica) keepBacklog(b *testing.B, backlog int) (stop func()) {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		for ctx.Err() == nil {
			var pending int
			if err := r.pool.QueryRow(ctx, `SELECT count(*) FROM ax.task WHERE state = 'pending'`).Scan(&pending); err != nil {
				done <- err
				return
			}
			if pending < backlog {
				if err := r.fireErr(backlog); err != nil {
					done <- err
					return
				}
				continue
			}
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
		done <- nil
	}()
	return func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			b.Fatal(err)
		}
	}
}
