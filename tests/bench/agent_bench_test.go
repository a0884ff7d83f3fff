package bench

import (
	"context"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/ax-scheduler/ax/agent"
	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/migrations"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// The end-to-end run: e2eTasks no-op tasks over e2eAgents agents of
// e2eCapacity slots each (an agent leases up to its free slots at once);
// River gets as many workers as the agents have slots and its defaults
// otherwise. Among 2–4 agents of 250–1000 slots, 3 × 500 was as fast as
// any (the differences were within the noise of a shared machine).
const (
	e2eTasks    = 10_000
	e2eWarmUp   = 200
	e2eAgents   = 3
	e2eCapacity = 500
	e2eTimeout  = 2 * time.Minute
)

func noop(context.Context, agent.Task) (agent.Result, error) { return nil, nil }

// BenchmarkEndToEnd: e2eTasks no-op tasks through one in-process ax
// replica and real agents over loopback HTTP (lease, run the handler,
// batched complete), against River working as many no-op jobs on the same
// database. Each side is timed from "all inserted" (commit returned) to
// "all completed" (the results committed). River runs first in each
// iteration, so whatever ax's writes leave behind (autovacuum) lands on ax.
//
// River fetches at most MaxWorkers jobs per FetchCooldown (100 ms by
// default), so its jobs/s here is capped near 10 × e2eAgents × e2eCapacity;
// the ratio is against River as configured, not River's ceiling.
//
// Next to the rates, each side's CPU per task over the same timed phase:
// this process's (getrusage: the side's clients, and for ax the replica
// and its agents) plus that of every Postgres backend of the benchmark's
// database, autovacuum workers included (cpuMeter). On 2 cores the rate
// follows the CPU, and CPU time is much less noisy than wall time on a
// shared machine. Both sides live in one process on one database, so each
// side's figure includes the other's idle background work (River's
// maintenance and fetch polls, ax's trigger loop, reaper and agents' long
// polls), which is small next to 10,000 tasks. With a remote DATABASE_URL
// the figures are the process's only (the benchmark logs so).
//
// And each side's WAL per task (the server's, over the same phase, each
// side's run after a checkpoint; wal-ratio-vs-river is ax's over River's):
// it moves little from run to run where CPU moves by a fifth, so it shows
// a change in what either side writes (see BenchmarkWritePath).
func BenchmarkEndToEnd(b *testing.B) {
	dbURL := dbtest.NewURL(b)
	ax := startReplica(b, dbURL)
	ax.startAgents(b, e2eAgents, e2eCapacity, noop)
	rv := startRiver(b, dbURL, e2eAgents*e2eCapacity, e2eTasks)
	cpu := newCPUMeter(b, dbURL)
	rv.run(b, e2eWarmUp, nil)
	ax.run(b, e2eWarmUp, nil)
	var axTime, riverTime time.Duration
	var axCPU, riverCPU cpuUsage
	var tasks int
	for b.Loop() {
		clearRuns(b, ax.pool)
		requestCheckpoint(b, ax.pool)
		t, u := rv.run(b, e2eTasks, cpu)
		riverTime, riverCPU = riverTime+t, riverCPU.add(u)
		requestCheckpoint(b, ax.pool)
		t, u = ax.run(b, e2eTasks, cpu)
		axTime, axCPU = axTime+t, axCPU.add(u)
		tasks += e2eTasks
	}
	axRate := float64(tasks) / axTime.Seconds()
	riverRate := float64(tasks) / riverTime.Seconds()
	b.ReportMetric(axRate, "tasks/s")
	b.ReportMetric(riverRate, "jobs/s")
	b.ReportMetric(axRate/riverRate, "ratio-vs-river")
	perTask := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(tasks) }
	b.ReportMetric(perTask(axCPU.total()), "ax-cpu-us-per-task")
	b.ReportMetric(perTask(riverCPU.total()), "river-cpu-us-per-task")
	b.ReportMetric(float64(axCPU.total())/float64(riverCPU.total()), "cpu-ratio-vs-river")
	b.ReportMetric(float64(axCPU.walBytes)/float64(tasks), "ax-wal-bytes-per-task")
	b.ReportMetric(float64(riverCPU.walBytes)/float64(tasks), "river-wal-bytes-per-task")
	b.ReportMetric(float64(axCPU.walBytes)/float64(riverCPU.walBytes), "wal-ratio-vs-river")
	b.Logf("CPU µs per task, process + Postgres (of which autovacuum): ax %.1f + %.1f (%.1f), River %.1f + %.1f (%.1f)",
		perTask(axCPU.process), perTask(axCPU.backends), perTask(axCPU.autovacuum),
		perTask(riverCPU.process), perTask(riverCPU.backends), perTask(riverCPU.autovacuum))
}

// run fires n executions and waits for all their tasks to succeed; with a
// meter, it also measures the CPU spent over the same span.
func (r *axReplica) run(b *testing.B, n int, cpu *cpuMeter) (time.Duration, cpuUsage) {
	b.Helper()
	target := r.succeeded(b) + n
	start := r.fire(b, n)
	phase := cpu.start(b)
	r.waitSucceeded(b, target, e2eTimeout)
	elapsed := time.Since(start)
	return elapsed, phase.end(b)
}

// clearRuns empties the tables a run fills (and, by CASCADE, whatever
// refers to them), so that every iteration starts from the same state.
func clearRuns(b *testing.B, pool *pgxpool.Pool) {
	b.Helper()
	_, err := pool.Exec(context.Background(), "TRUNCATE ax.task_event, ax.task, ax.execution, ax.task_history, ax.execution_history, ax.river_job CASCADE")
	if err != nil {
		b.Fatal(err)
	}
}

// noopArgs is River's no-op job.
type noopArgs struct{}

func (noopArgs) Kind() string { return "bench_noop" }

// riverRunner is a River client working no-op jobs in schema ax, on a pool
// of its own made like ax's.
type riverRunner struct {
	client    *river.Client[pgx.Tx]
	completed <-chan *river.Event
}

// startRiver starts a River client with maxWorkers workers that can report
// up to maxJobs completions between two reads.
func startRiver(b *testing.B, dbURL string, maxWorkers, maxJobs int) *riverRunner {
	b.Helper()
	ctx := context.Background()
	pool, err := db.Open(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(context.Context, *river.Job[noopArgs]) error { return nil }))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:  migrations.Schema,
		Logger:  benchLogger(),
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers,
	})
	if err != nil {
		b.Fatal(err)
	}
	completed, unsubscribe := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: maxJobs, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			b.Errorf("error stopping River: %v", err)
		}
		unsubscribe()
	})
	return &riverRunner{client: client, completed: completed}
}

// run inserts n jobs with InsertMany and waits for River to report them
// all completed (which it does once the completions are committed); with a
// meter, it also measures the CPU spent over the same span.
func (r *riverRunner) run(b *testing.B, n int, cpu *cpuMeter) (time.Duration, cpuUsage) {
	b.Helper()
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{}}
	}
	if _, err := r.client.InsertMany(context.Background(), params); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	phase := cpu.start(b)
	timeout := time.NewTimer(e2eTimeout)
	defer timeout.Stop()
	for done := 0; done < n; {
		select {
		case <-r.completed:
			done++
		case <-timeout.C:
			b.Fatalf("%d of %d River jobs completed after %s", done, n, e2eTimeout)
		}
	}
	elapsed := time.Since(start)
	return elapsed, phase.end(b)
}

// pickupRounds is how many single tasks BenchmarkPickup times per
// iteration.
const pickupRounds = 200

// BenchmarkPickup: one idle agent long-polls; a task is fired (committed
// with its NOTIFY, as the trigger loop does) and timed until the agent's
// handler starts. Each round waits for the result to be recorded and a
// few ms more, so the agent is idle again when the next task comes.
func BenchmarkPickup(b *testing.B) {
	ax := startReplica(b, dbtest.NewURL(b))
	started := make(chan time.Time, 1)
	ax.startAgents(b, 1, 0, func(context.Context, agent.Task) (agent.Result, error) {
		select { // a task seen twice (lost lease) must not block the agent
		case started <- time.Now():
		default:
		}
		return nil, nil
	})
	for range 10 { // warm up connections and statement caches
		ax.pickup(b, started)
	}
	var lat []time.Duration
	for b.Loop() {
		for range pickupRounds {
			lat = append(lat, ax.pickup(b, started))
		}
	}
	b.ReportMetric(percentileMillis(lat, 0.50), "pickup-p50-ms")
	b.ReportMetric(percentileMillis(lat, 0.99), "pickup-p99-ms")
}

// pickup fires one task and returns how long after its commit the agent's
// handler started.
func (r *axReplica) pickup(b *testing.B, started <-chan time.Time) time.Duration {
	b.Helper()
	target := r.succeeded(b) + 1
	committed := r.fire(b, 1)
	var at time.Time
	select {
	case at = <-started:
	case <-time.After(10 * time.Second):
		b.Fatal("the agent did not pick the task up within 10 s")
	}
	r.waitSucceeded(b, target, 10*time.Second)
	time.Sleep(time.Duration(5+rand.IntN(10)) * time.Millisecond)
	return at.Sub(committed)
}

// percentileMillis is the nearest-rank q-quantile of ds in milliseconds.
func percentileMillis(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := max(int(math.Ceil(q*float64(len(s))))-1, 0)
	return float64(s[i].Microseconds()) / 1000
}
