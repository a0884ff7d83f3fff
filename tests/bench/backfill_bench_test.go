package bench

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// The backfill run: backfillTicks ticks of an every-second no-op job
// (27.8 hours of them), backfillConcurrent unfinished at a time, run by
// e2eAgents agents of e2eCapacity slots.
const (
	backfillTicks      = 100_000
	backfillConcurrent = 1000 // the most a backfill takes
	backfillQuiet      = 10 * time.Second
	backfillTimeout    = 15 * time.Minute
)

// BenchmarkBackfillThroughAgents: a backfill of 100,000 ticks released by
// one in-process replica's backfill releaser and run by 3 real agents
// over loopback HTTP, while another job fires every second with
// fire-ahead (the default). It reports the ticks given a run per second
// (created-ticks/s, from the backfill's start until every tick has a run)
// and run to success per second (succeeded-ticks/s, until the last
// ended), and the other job's fire lag during the backfill
// (lag-p50-ms, lag-p99-ms over fires-during fires; goal p99 ≤ 20 ms;
// with fire-ahead a fire committed before its tick counts 0), next to
// its lag over backfillQuiet without one, measured just before in the
// same run
// (quiet-lag-p99-ms).
func BenchmarkBackfillThroughAgents(b *testing.B) {
	ctx := context.Background()
	ax := startReplica(b, dbtest.NewURL(b))
	ax.startAgents(b, e2eAgents, e2eCapacity, noop)
	releaser := schedule.NewBackfillReleaser(ax.pool, ax.notifier,
		schedule.BackfillReleaserConfig{Router: ax.router, Logger: benchLogger(), Metrics: ax.metrics})
	if err := releaser.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(releaser.Stop)
	everySecond := map[string]any{"trigger": map[string]any{"kind": "cron", "cron": "* * * * * *"}}
	clock := ax.createJobDef(b, everySecond)
	backfills := queue.NewBackfillService(ax.pool, nil, nil)
	for b.Loop() {
		quietFrom := time.Now()
		time.Sleep(backfillQuiet)
		_, quietP99, _ := jobLag(b, ax.pool, clock, quietFrom, time.Now())

		target := ax.createJobDef(b, everySecond)
		to := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
		began := time.Now()
		bf, err := backfills.Create(ctx, &queue.BackfillRequest{JobID: target, From: to.Add(-backfillTicks * time.Second),
			To: to, MaxConcurrent: backfillConcurrent})
		if err != nil {
			b.Fatal(err)
		}
		var created time.Duration
		for {
			got, err := backfills.Get(ctx, bf.ID)
			if err != nil {
				b.Fatal(err)
			}
			if created == 0 && got.TicksCreated+got.TicksExisting == backfillTicks {
				created = time.Since(began)
			}
			if got.RunsSucceeded+got.RunsFailed == backfillTicks {
				if got.RunsFailed > 0 {
					b.Fatalf("%d backfilled runs failed", got.RunsFailed)
				}
				break
			}
			if time.Since(began) > backfillTimeout {
				b.Fatalf("backfill not done after %s: %+v", backfillTimeout, got)
			}
			time.Sleep(100 * time.Millisecond)
		}
		ended := time.Since(began)
		p50, p99, fires := jobLag(b, ax.pool, clock, began, began.Add(ended))
		if fires == 0 {
			b.Fatal("the every-second job did not fire during the backfill")
		}
		b.ReportMetric(backfillTicks/created.Seconds(), "created-ticks/s")
		b.ReportMetric(backfillTicks/ended.Seconds(), "succeeded-ticks/s")
		b.ReportMetric(p50, "lag-p50-ms")
		b.ReportMetric(p99, "lag-p99-ms")
		b.ReportMetric(quietP99, "quiet-lag-p99-ms")
		b.ReportMetric(float64(fires), "fires-during")
	}
}

// jobLag is the fire lag percentiles (ms) of job's scheduled runs due in
// [from, to): fired_at - scheduled_for, 0 for a fire committed ahead.
func jobLag(b *testing.B, pool *pgxpool.Pool, job uuid.UUID, from, to time.Time) (p50, p99 float64, n int) {
	b.Helper()
	err := pool.QueryRow(context.Background(), `
		WITH l AS (SELECT greatest(fired_at - scheduled_for, interval '0') AS lag FROM ax.all_executions
		           WHERE job_id = $1 AND cause = 'schedule' AND scheduled_for >= $2 AND scheduled_for < $3)
		SELECT coalesce(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY lag)), 0) * 1000,
		       coalesce(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY lag)), 0) * 1000, count(*)
		FROM l`, job, from, to).Scan(&p50, &p99, &n)
	if err != nil {
		b.Fatal(err)
	}
	return p50, p99, n
}
