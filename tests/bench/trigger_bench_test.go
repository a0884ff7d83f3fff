package bench

import (
	"context"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// seedJobs inserts n shell jobs with trigger kind/expr straight in SQL (the
// API would take minutes for a million), due at nextFire.
func seedJobs(b *testing.B, pool *pgxpool.Pool, n int, kind, cronExpr string, interval int, nextFire string) {
	b.Helper()
	ctx := context.Background()
	const chunk = 100_000
	for from := 0; from < n; from += chunk {
		to := min(from+chunk, n)
		_, err := pool.Exec(ctx, `
			WITH j AS (
				INSERT INTO ax.job (name, trigger_kind, cron_expr, interval_seconds, executor_kind, executor, agentless)
				SELECT 'bench-' || i, $3::ax.trigger_kind, nullif($4, ''), nullif($5, 0), 'shell', '{"command":"true"}', false
				FROM generate_series($1::int, $2::int - 1) AS i
				RETURNING id)
			INSERT INTO ax.trigger (job_id, next_fire_at) SELECT id, `+nextFire+` FROM j`,
			from, to, kind, cronExpr, interval)
		if err != nil {
			b.Fatalf("error seeding jobs: %v", err)
		}
	}
	if _, err := pool.Exec(ctx, "VACUUM ANALYZE ax.trigger"); err != nil {
		b.Fatal(err)
	}
}

// runLoops starts workers trigger loops (as one replica's worth) until the
// returned stop is called.
func runLoops(pool *pgxpool.Pool, cfg schedule.TriggerLoopConfig) (stop func()) {
	ctx := context.Background()
	notifier := notify.NewNotifier(pool, nil, notify.JobChangedChannel)
	_ = notifier.Start(ctx)
	loop := schedule.NewTriggerLoop(pool, notifier, cfg)
	_ = loop.Start(ctx)
	return func() { loop.Stop(); notifier.Stop() }
}

// lagPercentiles measures how late fires became runnable: a fire
// committed before its tick (fire-ahead) has its tasks held until the
// tick, so its lag is 0. ahead is the share of fires committed early.
func lagPercentiles(b *testing.B, pool *pgxpool.Pool, from, to time.Time) (p50, p99, ahead float64, n int) {
	b.Helper()
	err := pool.QueryRow(context.Background(), `
		WITH l AS (SELECT greatest(fired_at - scheduled_for, interval '0') AS lag, fired_at < scheduled_for AS early
		           FROM ax.all_executions WHERE scheduled_for >= $1 AND scheduled_for < $2)
		SELECT coalesce(extract(epoch FROM percentile_cont(0.5) WITHIN GROUP (ORDER BY lag)), 0) * 1000,
		       coalesce(extract(epoch FROM percentile_cont(0.99) WITHIN GROUP (ORDER BY lag)), 0) * 1000,
		       coalesce(avg(early::int), 0) * 100, count(*)
		FROM l`, from, to).Scan(&p50, &p99, &ahead, &n)
	if err != nil {
		b.Fatal(err)
	}
	return p50, p99, ahead, n
}

// BenchmarkFireLag: 1,000 jobs firing every second (1,000 fires/s, all at
// the top of each second) for 20 s; lag is fired_at - scheduled_for.
// With fire-ahead (the default) executions commit up to 250 ms early and
// their tasks wait for the tick; the "off" variant shows the raw lag of
// inserting a burst after the tick.
func BenchmarkFireLag(b *testing.B) {
	for _, ahead := range []struct {
		name string
		d    time.Duration
	}{{"fire-ahead=250ms", 0}, {"fire-ahead=off", -1}} {
		b.Run(ahead.name, func(b *testing.B) { benchFireLag(b, ahead.d) })
	}
}

func benchFireLag(b *testing.B, fireAhead time.Duration) {
	pool := dbtest.New(b)
	seedJobs(b, pool, 1000, "cron", "* * * * * *", 0, "date_trunc('second', now()) + interval '2 seconds'")
	for b.Loop() {
		start := time.Now().Truncate(time.Second).Add(2 * time.Second)
		stop := runLoops(pool, schedule.TriggerLoopConfig{FireAhead: fireAhead})
		time.Sleep(time.Until(start.Add(20*time.Second + 500*time.Millisecond)))
		stop()
		p50, p99, ahead, n := lagPercentiles(b, pool, start, start.Add(20*time.Second))
		b.ReportMetric(p50, "lag-p50-ms")
		b.ReportMetric(p99, "lag-p99-ms")
		b.ReportMetric(ahead, "%-fired-ahead")
		b.ReportMetric(float64(n)/20, "fires/s")
	}
}

// BenchmarkFireThroughput: 50,000 jobs fall due at once; one replica's
// trigger loop fires them all; fires/s is how fast it drains them.
// ratio-vs-insert-baseline divides it by the rate at which the same
// database, in the same run, takes as many execution-sized rows in
// plain batched inserts into an unindexed table (insertFloor): the floor
// of the machine, so that its speed, which differs between sessions by
// up to 2x, cancels out.
func BenchmarkFireThroughput(b *testing.B) {
	const jobs = 50_000
	var fires, floor float64
	for b.Loop() {
		b.StopTimer()
		pool := dbtest.New(b)
		seedJobs(b, pool, jobs, "interval", "", 3600, "now()")
		loop := schedule.NewTriggerLoop(pool, nil, schedule.TriggerLoopConfig{MisfireThreshold: time.Hour})
		b.StartTimer()
		start := time.Now()
		fired := drain(b, loop)
		elapsed := time.Since(start)
		if fired != jobs {
			b.Fatalf("fired %d of %d", fired, jobs)
		}
		fires += float64(jobs) / elapsed.Seconds()
		b.StopTimer()
		// The floor takes a fraction of a second: the median of three.
		floors := []float64{insertFloor(b, pool, jobs, 500), insertFloor(b, pool, jobs, 500), insertFloor(b, pool, jobs, 500)}
		sort.Float64s(floors)
		floor += floors[1] // 500: the trigger loop's batch
		b.StartTimer()
	}
	b.ReportMetric(fires/float64(b.N), "fires/s")
	b.ReportMetric(floor/float64(b.N), "insert-floor-rows/s")
	b.ReportMetric(fires/floor, "ratio-vs-insert-baseline")
}

// insertFloor returns the rows per second at which two writers, as the
// fire benchmark's two claimers, insert n rows shaped as ax.execution's
// (the same columns and types, values as a fire makes them) in batches
// of batch, one INSERT ... SELECT unnest(...) each, into a table with no
// index, constraint or trigger.
func insertFloor(b *testing.B, pool *pgxpool.Pool, n, batch int) float64 {
	b.Helper()
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `DROP TABLE IF EXISTS bench_insert_floor;
		CREATE TABLE bench_insert_floor (id uuid, job_id uuid, cause text, scheduled_for timestamptz,
			fired_at timestamptz, misfired boolean, state text, params jsonb, shard_count integer, priority integer,
			created_at timestamptz, updated_at timestamptz, traceparent text, trigger_index smallint)`); err != nil {
		b.Fatal(err)
	}
	type rows struct {
		ids, jobs []uuid.UUID
		at        []time.Time
		trace     []string
	}
	batches := make(chan rows, n/batch+1)
	for from := 0; from < n; from += batch {
		var r rows
		for range min(batch, n-from) {
			id := uuid.Must(uuid.NewV7())
			r.ids, r.jobs, r.at = append(r.ids, id), append(r.jobs, uuid.New()), append(r.at, time.Now())
			r.trace = append(r.trace, "00-"+strings.ReplaceAll(id.String(), "-", "")+"-0123456789abcdef-01")
		}
		batches <- r
	}
	close(batches)
	start := time.Now()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for r := range batches {
				_, err := pool.Exec(ctx, `INSERT INTO bench_insert_floor
					SELECT id, job_id, 'schedule', at, now(), false, 'pending', '{}'::jsonb, 1, 0, now(), now(), trace, 0
					FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[], $4::text[]) AS u(id, job_id, at, trace)`,
					r.ids, r.jobs, r.at, r.trace)
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}

func drain(b *testing.B, loop *schedule.TriggerLoop) int {
	var total int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 2 { // two claimers, as replicas would: SKIP LOCKED splits the work
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				n, err := loop.FireDue(context.Background())
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				total += n
				mu.Unlock()
				if n == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	return total
}

// BenchmarkFireScale: the cost of firing 100 due jobs among 10,000 vs
// 1,000,000 registered ones. The due index makes it independent of the
// total: cost-ratio-1M-vs-10k should stay near 1.
func BenchmarkFireScale(b *testing.B) {
	for b.Loop() {
		small := fireCost(b, 10_000)
		large, rss := fireCostWithRSS(b, 1_000_000)
		b.ReportMetric(small.Seconds()*1e6/100, "us/fire-10k")
		b.ReportMetric(large.Seconds()*1e6/100, "us/fire-1M")
		b.ReportMetric(large.Seconds()/small.Seconds(), "cost-ratio-1M-vs-10k")
		b.ReportMetric(float64(rss)/(1<<20), "rss-MiB-at-1M")
	}
}

func fireCost(b *testing.B, jobs int) time.Duration {
	d, _ := fireCostWithRSS(b, jobs)
	return d
}

// fireCostWithRSS returns the median time of firing 100 due jobs among
// `jobs` (over 15 rounds) and the process RSS afterwards.
func fireCostWithRSS(b *testing.B, jobs int) (time.Duration, int64) {
	b.StopTimer()
	pool := dbtest.New(b)
	seedJobs(b, pool, jobs, "interval", "", 86400, "now() + interval '1 day'")
	loop := schedule.NewTriggerLoop(pool, nil, schedule.TriggerLoopConfig{})
	ctx := context.Background()
	var rounds []time.Duration
	for round := range 15 {
		_, err := pool.Exec(ctx, `UPDATE ax.trigger SET next_fire_at = now() - interval '1 second'
			WHERE job_id IN (SELECT id FROM ax.job WHERE name IN (SELECT 'bench-' || (i * $1 / 100 + $2)
			FROM generate_series(0, 99) i))`, jobs, round)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		n, err := loop.FireDue(ctx)
		rounds = append(rounds, time.Since(start))
		b.StopTimer()
		if err != nil || n != 100 {
			b.Fatalf("fired %d, err %v", n, err)
		}
	}
	sort.Slice(rounds, func(i, j int) bool { return rounds[i] < rounds[j] })
	b.StartTimer()
	return rounds[len(rounds)/2], rssBytes()
}

func rssBytes() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			kb, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
