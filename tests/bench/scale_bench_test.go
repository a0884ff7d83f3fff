package bench

import (
	"context"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/tests/dbtest"
)

// Shapes of the scale benchmarks (issue #15).
const (
	// BenchmarkEndToEndReplicas: EndToEnd's 1,500 slots as 4 agents of
	// 375, so that they split evenly over two replicas.
	replicaAgents   = 4
	replicaCapacity = 375

	// BenchmarkManyAgents: 200 agents of 5 slots against 4 of 250 (the
	// same 1,000 slots), each side on a replica and database of its own,
	// a backlog kept so that leases find work, measured over a window.
	manyAgents   = 200
	manyCapacity = 5
	fewAgents    = 4
	fewCapacity  = 250
	manyBacklog  = 2_000
	manyWindow   = 5 * time.Second
	manyPaceTick = 10 * time.Millisecond

	// BenchmarkIdleCost: agents long-polling for idleWindow with one
	// pending task none of them may take.
	idleAgents = 50
	idleWindow = 10 * time.Second

	// BenchmarkTrickleCost: trickleAgents agents long-polling while
	// trickleTasks tasks any of them may take arrive one per trickleEvery.
	trickleAgents = 200
	trickleTasks  = 100
	trickleEvery  = 100 * time.Millisecond
)

// BenchmarkEndToEndReplicas runs e2eTasks no-op tasks at a time through
// one ax replica, and through two replicas serving the same database, with
// as many agents and slots on each side (4 × 375);
// the two-replica side's agents are split between the replicas. Each
// side's agents carry a label (side=one, side=two) that only its job
// targets, so the idle side's agents never take the other side's tasks.
// Both sides are fired by the same replica, in one transaction per batch
// as in BenchmarkEndToEnd. Each iteration runs one, two, two, one, every
// time from empty tables, so neither side pays for the other's dead rows
// and history, and one iteration is no more one side's than the other's
// (at the default benchtime it is the only one). Reports each
// side's tasks/s and CPU per task (this process and the database's
// backends), and ratio-2-vs-1-replicas (tasks/s; goal ≥ 0.95).
func BenchmarkEndToEndReplicas(b *testing.B) {
	dbURL := dbtest.NewURL(b)
	r1, r2 := startReplica(b, dbURL), startReplica(b, dbURL)
	replicas := []*axReplica{r1, r2}
	one := &replicaSide{fire: r1, all: replicas, job: r1.createJobFor(b, map[string]string{"side": "one"})}
	two := &replicaSide{fire: r1, all: replicas, job: r1.createJobFor(b, map[string]string{"side": "two"})}
	r1.startAgentSet(b, agentSet{n: replicaAgents, capacity: replicaCapacity, name: "one",
		labels: map[string]string{"side": "one"}}, noop)
	for i, r := range replicas {
		r.startAgentSet(b, agentSet{n: replicaAgents / 2, capacity: replicaCapacity, name: fmt.Sprintf("two-%d", i),
			labels: map[string]string{"side": "two"}}, noop)
	}
	r1.waitAgentsReady(b, 2*replicaAgents)
	cpu := newCPUMeter(b, dbURL)
	one.run(b, e2eWarmUp, nil)
	two.run(b, e2eWarmUp, nil)
	one.time, two.time, one.use, two.use = 0, 0, cpuUsage{}, cpuUsage{}

	var tasks int
	for b.Loop() {
		for _, s := range []*replicaSide{one, two, two, one} {
			clearRuns(b, r1.pool)
			s.run(b, e2eTasks, cpu)
		}
		tasks += 2 * e2eTasks
	}
	oneRate := float64(tasks) / one.time.Seconds()
	twoRate := float64(tasks) / two.time.Seconds()
	perTask := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(tasks) }
	b.ReportMetric(oneRate, "one-replica-tasks/s")
	b.ReportMetric(twoRate, "two-replicas-tasks/s")
	b.ReportMetric(twoRate/oneRate, "ratio-2-vs-1-replicas")
	b.ReportMetric(perTask(one.use.total()), "one-replica-cpu-us-per-task")
	b.ReportMetric(perTask(two.use.total()), "two-replicas-cpu-us-per-task")
	b.Logf("CPU µs per task, process + Postgres: one replica %.1f + %.1f, two replicas %.1f + %.1f",
		perTask(one.use.process), perTask(one.use.backends), perTask(two.use.process), perTask(two.use.backends))
}

// replicaSide is one side of BenchmarkEndToEndReplicas: its job, the
// replica that fires it, every replica of the database (whose result
// counters add up to the side's), and what its iterations took so far.
type replicaSide struct {
	fire *axReplica
	all  []*axReplica
	job  uuid.UUID
	time time.Duration
	use  cpuUsage
}

// run fires n runs of the side's job and waits for their successes.
func (s *replicaSide) run(b *testing.B, n int, cpu *cpuMeter) {
	b.Helper()
	succeeded := func() int {
		var sum int
		for _, r := range s.all {
			sum += r.succeeded(b)
		}
		return sum
	}
	target := succeeded() + n
	if err := s.fire.fireJob(s.job, n); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	phase := cpu.start(b)
	deadline := start.Add(e2eTimeout)
	for succeeded() < target {
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d tasks succeeded after %s", succeeded()-(target-n), n, e2eTimeout)
		}
		time.Sleep(500 * time.Microsecond)
	}
	s.time += time.Since(start)
	if cpu != nil {
		s.use = s.use.add(phase.end(b))
	}
}

// BenchmarkManyAgents runs 200 agents of 5 slots (in-process agent
// runtimes over loopback HTTP) against one replica, and 4 agents of 250
// slots (the same 1,000) against another, each replica on a database of
// its own, in the same process run. Each side in turn gets a backlog of
// manyBacklog pending no-op tasks, kept topped up, so that a lease finds
// work at once; after a second of it, the replica's lease and complete
// calls are timed at the server for manyWindow while the database's
// client connections are counted every 20 ms. Reports each side's tasks/s
// (results recorded in the window), lease-p99-ms (the 200 agents'; goal
// ≤ 20), lease-p99-ratio-200-vs-4-agents (that p99 over the 4 agents'),
// db-conns (the most connections the 200 agents' database had open at
// once; goal ≤ the replica's pool sizes, engine's and requests', reported
// as db-pool-size; the counter's own connection is not counted).
//
// Then the paced shape (issue #43): the 200 agents are offered half the
// rate the 4 agents took in the same iteration (paced-offered-tasks/s),
// fired every manyPaceTick for manyWindow with no backlog, and each
// task's lease is timed from its run's fire to its lease by the
// database's clock: paced-lease-p99-ms (goal ≤ 20) and -p50-ms. A long
// poll's own time is not the measure there: it waits for work.
func BenchmarkManyAgents(b *testing.B) {
	type side struct {
		r         *axReplica
		dbURL     string
		tasks     int
		window    time.Duration
		leases    []time.Duration
		completes []time.Duration
		conns     int
	}
	many, few := &side{dbURL: dbtest.NewURL(b)}, &side{dbURL: dbtest.NewURL(b)}
	many.r, few.r = startReplica(b, many.dbURL), startReplica(b, few.dbURL)
	many.r.startAgentSet(b, agentSet{n: manyAgents, capacity: manyCapacity, name: "many"}, noop)
	few.r.startAgentSet(b, agentSet{n: fewAgents, capacity: fewCapacity, name: "few"}, noop)
	many.r.waitAgentsReady(b, manyAgents)
	few.r.waitAgentsReady(b, fewAgents)
	many.r.run(b, e2eWarmUp, nil)
	few.r.run(b, e2eWarmUp, nil)

	measure := func(s *side) {
		stop := s.r.keepBacklog(b, manyBacklog)
		time.Sleep(time.Second)
		counted := countConns(b, s.dbURL)
		before := s.r.succeeded(b)
		s.r.requests.record()
		began := time.Now()
		time.Sleep(manyWindow)
		calls := s.r.requests.stop()
		s.window += time.Since(began)
		s.tasks += s.r.succeeded(b) - before
		s.conns = max(s.conns, counted())
		stop()
		for _, c := range calls {
			if c.lease {
				s.leases = append(s.leases, c.took)
			} else {
				s.completes = append(s.completes, c.took)
			}
		}
		s.r.waitIdle(b)
		clearRuns(b, s.r.pool)
	}
	// The paced shape: the 200 agents offered half of what the 4 took
	// in the same iteration, fired in small batches every manyPaceTick
	// (not a backlog), each task timed from its fire to its lease.
	var pacedLeases []time.Duration
	var offered float64
	paced := func(rate float64) {
		since := pacedFire(b, many.r, rate, manyWindow)
		many.r.waitIdle(b)
		pacedLeases = append(pacedLeases, leaseLags(b, many.r, since)...)
		clearRuns(b, many.r.pool)
	}
	var n int
	for b.Loop() {
		fewBefore, fewWindow := few.tasks, few.window
		if n%2 == 0 {
			measure(many)
			measure(few)
		} else {
			measure(few)
			measure(many)
		}
		rate := float64(few.tasks-fewBefore) / (few.window - fewWindow).Seconds() / 2
		offered += rate
		paced(rate)
		n++
	}
	manyP99, fewP99 := percentileMillis(many.leases, 0.99), percentileMillis(few.leases, 0.99)
	b.ReportMetric(float64(many.tasks)/many.window.Seconds(), "tasks/s")
	b.ReportMetric(float64(few.tasks)/few.window.Seconds(), "few-agents-tasks/s")
	b.ReportMetric(manyP99, "lease-p99-ms")
	b.ReportMetric(fewP99, "few-agents-lease-p99-ms")
	b.ReportMetric(manyP99/fewP99, "lease-p99-ratio-200-vs-4-agents")
	b.ReportMetric(percentileMillis(many.completes, 0.99), "complete-p99-ms")
	b.ReportMetric(float64(many.conns), "db-conns")
	b.ReportMetric(float64(few.conns), "few-agents-db-conns")
	b.ReportMetric(float64(many.r.pool.Config().MaxConns+many.r.requestPool.Config().MaxConns), "db-pool-size")
	b.ReportMetric(offered/float64(n), "paced-offered-tasks/s")
	b.ReportMetric(percentileMillis(pacedLeases, 0.99), "paced-lease-p99-ms")
	b.ReportMetric(percentileMillis(pacedLeases, 0.5), "paced-lease-p50-ms")
	b.Logf("%d agents × %d slots: %d leases, %d completes timed; %d agents × %d slots: %d leases, %d completes",
		manyAgents, manyCapacity, len(many.leases), len(many.completes), fewAgents, fewCapacity, len(few.leases), len(few.completes))
}

// pacedFire fires runs of r's bench job at rate a second for window, a
// batch every manyPaceTick (the fractions carried over), and returns the
// database's clock before the first fire.
func pacedFire(b *testing.B, r *axReplica, rate float64, window time.Duration) time.Time {
	b.Helper()
	var since time.Time
	if err := r.pool.QueryRow(context.Background(), `SELECT clock_timestamp()`).Scan(&since); err != nil {
		b.Fatal(err)
	}
	tick := time.NewTicker(manyPaceTick)
	defer tick.Stop()
	owed := 0.0
	for end := time.Now().Add(window); time.Now().Before(end); <-tick.C {
		owed += rate * manyPaceTick.Seconds()
		if batch := int(owed); batch > 0 {
			owed -= float64(batch)
			r.fire(b, batch)
		}
	}
	return since
}

// leaseLags returns, for each task of r's database fired at or after
// since, how long it took from its run's fire (fired_at, before the fire's
// commit: an upper bound) to its lease (leased_at), both by the database's
// clock.
func leaseLags(b *testing.B, r *axReplica, since time.Time) []time.Duration {
	b.Helper()
	rows, err := r.pool.Query(context.Background(), `
		SELECT extract(epoch FROM t.leased_at - e.fired_at) * 1e6
		FROM ax.all_tasks t JOIN ax.all_executions e ON e.id = t.execution_id
		WHERE e.fired_at >= $1 AND t.leased_at IS NOT NULL`, since)
	if err != nil {
		b.Fatal(err)
	}
	var out []time.Duration
	for rows.Next() {
		var us float64
		if err := rows.Scan(&us); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Duration(us)*time.Microsecond)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	if len(out) == 0 {
		b.Fatal("no task was leased in the paced window")
	}
	return out
}

// waitIdle waits until no task of r's database is pending, leased or
// running.
func (r *axReplica) waitIdle(b *testing.B) {
	b.Helper()
	deadline := time.Now().Add(e2eTimeout)
	for {
		var busy int
		err := r.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM ax.task WHERE state IN ('pending', 'leased', 'running')").Scan(&busy)
		if err != nil {
			b.Fatal(err)
		}
		if busy == 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d tasks still pending or in flight after %s", busy, e2eTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countConns counts, every 20 ms until the returned function is called,
// the client connections open to the database at dbURL (its own, on the
// server's maintenance database, not counted), and returns the most seen.
func countConns(b *testing.B, dbURL string) func() int {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	conn, name := statsConn(b, dbURL)
	var most int
	var wg sync.WaitGroup
	var err error
	wg.Go(func() {
		for ctx.Err() == nil {
			var n int
			if err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE datname = $1 AND backend_type = 'client backend'`, name).Scan(&n); err != nil {
				return
			}
			most = max(most, n)
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	})
	return func() int {
		cancel()
		wg.Wait()
		if err != nil && ctx.Err() == nil {
			b.Fatal(err)
		}
		return most
	}
}

// statsConn connects to the maintenance database (postgres) of the server
// of dbURL, so that reading the statistics of dbURL's database adds no
// connection or transaction to it, and returns that database's name.
func statsConn(b *testing.B, dbURL string) (*pgx.Conn, string) {
	b.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		b.Fatal(err)
	}
	name := u.Path[1:]
	u.Path = "/postgres"
	conn, err := pgx.Connect(context.Background(), u.String())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close(context.Background()) })
	return conn, name
}

// xactCommits returns a reader of the transactions committed so far in
// dbURL's database (pg_stat_database, read from the maintenance database).
func xactCommits(b *testing.B, dbURL string) func() int64 {
	conn, name := statsConn(b, dbURL)
	return func() int64 {
		var n int64
		if err := conn.QueryRow(context.Background(),
			"SELECT xact_commit FROM pg_stat_database WHERE datname = $1", name).Scan(&n); err != nil {
			b.Fatal(err)
		}
		return n
	}
}

// BenchmarkIdleCost runs idleAgents agents that long-poll with nothing
// they may take: one pending task of a job targeting a label none of them
// has. Over idleWindow it counts the transactions their database
// committed (pg_stat_database.xact_commit, read from the maintenance
// database, after waiting out the statistics' flush delay at both ends)
// and reports db-xacts-per-s and db-xacts-per-agent-per-heartbeat (goal:
// at most 2; the heartbeat interval is the server's default, 5 s). The
// replica's own loops (trigger loop, reaper, maintenance, and River's
// workers polling their queues) are counted too: they are part of what
// an idle deployment costs.
func BenchmarkIdleCost(b *testing.B) {
	const heartbeat = 5 * time.Second
	dbURL := dbtest.NewURL(b)
	r := startReplicaWithRiver(b, dbURL)
	r.startAgentSet(b, agentSet{n: idleAgents, capacity: 5, name: "idle"}, noop)
	r.waitAgentsReady(b, idleAgents)
	nobody := r.createJobFor(b, map[string]string{"pool": "nobody"})
	if err := r.fireJob(nobody, 1); err != nil {
		b.Fatal(err)
	}
	commits := xactCommits(b, dbURL)
	// Backends flush their counts at most once a second while busy and
	// within 10 s when idle: the windows are read in a steady state, so
	// the delay shifts both ends alike.
	time.Sleep(11 * time.Second)
	var xacts int64
	var window time.Duration
	for b.Loop() {
		began, before := time.Now(), commits()
		time.Sleep(idleWindow)
		xacts += commits() - before
		window += time.Since(began)
	}
	var pending int
	if err := r.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM ax.task WHERE job_id = $1 AND state = 'pending'", nobody).Scan(&pending); err != nil {
		b.Fatal(err)
	}
	if pending != 1 {
		b.Fatalf("%d tasks of the job no agent may take are pending, want 1", pending)
	}
	perSecond := float64(xacts) / window.Seconds()
	b.ReportMetric(perSecond, "db-xacts-per-s")
	b.ReportMetric(perSecond*heartbeat.Seconds()/idleAgents, "db-xacts-per-agent-per-heartbeat")
}

// BenchmarkTrickleCost measures what a task costs the database when many
// agents wait for work and tasks arrive one at a time (trickleAgents × 5
// slots, a task any of them may take every trickleEvery): db-xacts-per-task
// is the transactions committed in the benchmark's database from the
// first fire to the last task's success, less what the waiting agents
// cost meanwhile without tasks (measured first, reported as
// idle-xacts-per-s), divided by the tasks. A fire, a lease and a result
// are three; every waiting long poll that a task-ready notification wakes
// added its own check, so the figure grew with the agents (16 with 10
// agents, 59 with 50, 213 with 200) until the polls' checks were read
// together (11.5 with 200; #15).
func BenchmarkTrickleCost(b *testing.B) {
	dbURL := dbtest.NewURL(b)
	r := startReplica(b, dbURL)
	r.startAgentSet(b, agentSet{n: trickleAgents, capacity: 5, name: "waiting"}, noop)
	r.waitAgentsReady(b, trickleAgents)
	commits := xactCommits(b, dbURL)
	// Backends flush their counts at most once a second while busy and
	// within 10 s when idle: read in a steady state (as BenchmarkIdleCost).
	time.Sleep(11 * time.Second)
	began, before := time.Now(), commits()
	time.Sleep(idleWindow)
	idlePerSecond := float64(commits()-before) / time.Since(began).Seconds()
	var perTask float64
	for b.Loop() {
		target := r.succeeded(b) + trickleTasks
		began, before := time.Now(), commits()
		for range trickleTasks {
			if err := r.fireJob(r.jobID, 1); err != nil {
				b.Fatal(err)
			}
			time.Sleep(trickleEvery)
		}
		r.waitSucceeded(b, target, e2eTimeout)
		time.Sleep(2 * time.Second) // the counts' flush
		busy := float64(commits()-before) - idlePerSecond*time.Since(began).Seconds()
		perTask += busy / trickleTasks
	}
	b.ReportMetric(idlePerSecond, "idle-xacts-per-s")
	b.ReportMetric(perTask/float64(b.N), "db-xacts-per-task")
}
