package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

// env is the dispatch side of the engine on a fresh database: a listening
// notifier, a lease broker and the services that make jobs and runs.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	broker *dispatch.LeaseBroker
	cfg    dispatch.AgentConfig
	router *dispatch.TaskRouter // routes the runs trigger makes; nil: none is routed
	keyID  uuid.UUID
}

// setup starts a notifier and a lease broker; mutate adjusts the agent
// protocol first. Leases last 30 s and the idle recheck is a minute unless
// a test says otherwise, so only what a test does moves anything.
func setup(t *testing.T, mutate func(*dispatch.AgentConfig)) *env {
	t.Helper()
	t.Parallel()
	pool := dbtest.New(t)
	n := notify.NewNotifier(pool, nil, notify.TaskReadyChannel, notify.JobChangedChannel)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	cfg := dispatch.AgentConfig{Lease: 30 * time.Second, IdleRecheck: time.Minute}
	if mutate != nil {
		mutate(&cfg)
	}
	e := &env{t: t, pool: pool, cfg: cfg, broker: dispatch.NewLeaseBroker(pool, n, cfg, nil, nil)}
	e.keyID = e.apiKey()
	return e
}

func (e *env) apiKey() uuid.UUID {
	e.t.Helper()
	return testfactory.APIKey(context.Background(), e.t, e.pool, &testfactory.APIKeyOpts{Name: "agents"}).ID
}

// agent registers a shell agent with labels and makes it ready by a
// heartbeat; mutate adjusts the registration first.
func (e *env) agent(labels map[string]string, mutate func(a *axtype.Agent)) *axtype.Agent {
	e.t.Helper()
	ctx := context.Background()
	a := &axtype.Agent{Name: "agent-" + uuid.NewString()[:8], Labels: labels, Capacity: 100, APIKeyID: e.keyID,
		Executors: []string{"shell"}}
	if mutate != nil {
		mutate(a)
	}
	registered, err := e.broker.Register(ctx, a)
	require.NoError(e.t, err)
	require.False(e.t, registered.Ready, "an agent is not ready before its first heartbeat")
	ready := true
	_, err = e.broker.Heartbeat(ctx, registered.ID, nil, &axtype.AgentLoad{Ready: &ready})
	require.NoError(e.t, err)
	got, err := e.broker.Get(ctx, registered.ID)
	require.NoError(e.t, err)
	require.True(e.t, got.Ready)
	return got
}

// job creates a manual shell job; mutate adjusts it first.
func (e *env) job(mutate func(j *axtype.Job)) *axtype.Job {
	e.t.Helper()
	return testfactory.Job(context.Background(), e.t, e.pool, &testfactory.JobOpts{Edit: mutate})
}

func (e *env) trigger(jobID uuid.UUID) *axtype.Execution {
	e.t.Helper()
	return testfactory.Execution(context.Background(), e.t, e.pool, jobID, fireOpts(e.router))
}

// fireOpts makes runs as the engine's fires do with router (nil: no
// routing): shard generators rendered, tasks routed as they are written.
func fireOpts(router *dispatch.TaskRouter) *testfactory.ExecutionOpts {
	opts := &testfactory.ExecutionOpts{ShardParams: dispatch.GeneratedShardParams}
	if router != nil {
		opts.Live, opts.Route = router.Live(), router.RouteFunc
	}
	return opts
}

// cancel cancels a run, as the execution service does (these tests have
// no outbox to tell).
func (e *env) cancel(id uuid.UUID) {
	e.t.Helper()
	_, err := db.ExecutionCancel(context.Background(), e.pool, []uuid.UUID{id}, nil, "stop")
	require.NoError(e.t, err)
}

// lease asks once for up to limit tasks, without waiting.
func (e *env) lease(a *axtype.Agent, limit int) []*axtype.LeasedTask {
	e.t.Helper()
	tasks, err := e.broker.Lease(context.Background(), a, limit, 0)
	require.NoError(e.t, err)
	return tasks
}

func (e *env) task(id uuid.UUID) *axtype.Task {
	e.t.Helper()
	var task *axtype.Task
	tasks, err := db.TaskListByExecution(context.Background(), e.pool, e.executionOf(id))
	require.NoError(e.t, err)
	for _, t := range tasks {
		if t.ID == id {
			task = t
		}
	}
	require.NotNil(e.t, task)
	return task
}

func (e *env) executionOf(taskID uuid.UUID) uuid.UUID {
	e.t.Helper()
	var id uuid.UUID
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT execution_id FROM ax.all_tasks WHERE id = $1", taskID).Scan(&id))
	return id
}

// agentOf returns the agent that holds (or last held) a task's lease.
func (e *env) agentOf(taskID uuid.UUID) uuid.UUID {
	e.t.Helper()
	var id uuid.UUID
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT agent_id FROM ax.all_tasks WHERE id = $1", taskID).Scan(&id))
	return id
}

func (e *env) execution(id uuid.UUID) *axtype.Execution {
	e.t.Helper()
	exec, err := db.ExecutionGetByID(context.Background(), e.pool, id)
	require.NoError(e.t, err)
	return exec
}

// eventually polls cond until it holds or 10 s pass.
func (e *env) eventually(cond func() bool, msg string) {
	e.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out waiting: %s", msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// dbNow is the database's clock, now.
func (e *env) dbNow() time.Time {
	e.t.Helper()
	var now time.Time
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now))
	return now
}

// pollWaiting waits until a long poll of this test's broker has leased
// nothing and begun checking for leasable tasks: a task written from then
// on is found by that check or wakes the poll's wait by its NOTIFY (the
// poll subscribed before its first lease). The check's own statement is
// no longer the last of its connection (it runs in a transaction with
// generic plans), so the broker's count of checks says so.
func (e *env) pollWaiting() {
	e.t.Helper()
	e.eventually(func() bool { return e.broker.LeaseChecksForTest() > 0 }, "the long poll to wait")
}

// taskRowsRead is how many task rows tx's backend has read: its counts
// since they were last flushed (Postgres 15), and nothing is flushed
// inside a transaction, so a statement's reads are the difference.
func taskRowsRead(t *testing.T, tx pgx.Tx) int64 {
	t.Helper()
	var n int64
	require.NoError(t, tx.QueryRow(context.Background(), `SELECT idx_tup_fetch + seq_tup_read
		FROM pg_stat_xact_user_tables WHERE relid = 'ax.task'::regclass`).Scan(&n))
	return n
}

func ids(tasks []*axtype.LeasedTask) []uuid.UUID {
	out := make([]uuid.UUID, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	return out
}

// brokerTracedBy is a lease broker on a pool of the test's database whose
// statements tracer sees.
func (e *env) brokerTracedBy(tracer pgx.QueryTracer) *dispatch.LeaseBroker {
	e.t.Helper()
	return dispatch.NewLeaseBroker(e.poolTracedBy(tracer), nil, e.cfg, nil, nil)
}

// poolTracedBy is a pool of the test's database whose statements tracer
// sees.
func (e *env) poolTracedBy(tracer pgx.QueryTracer) *pgxpool.Pool {
	e.t.Helper()
	cfg := e.pool.Config().Copy()
	cfg.ConnConfig.Tracer = tracer
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(traced.Close)
	return traced
}

// agentsAndTasks registers n ready agents and fires a run of n shards,
// one pending task for each of them.
func (e *env) agentsAndTasks(n int) []*axtype.Agent {
	e.t.Helper()
	agents := make([]*axtype.Agent, n)
	for i := range agents {
		agents[i] = e.agent(nil, nil)
	}
	e.trigger(e.job(func(j *axtype.Job) { j.ShardCount = n }).ID)
	return agents
}
