package dispatch_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

// env is the dispatch side of the engine on a fresh database: a listening
// notifier, a lease broker and the services that make jobs and runs.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	broker *dispatch.LeaseBroker
	cfg    dispatch.AgentConfig
	jobs   *queue.JobService
	execs  *queue.ExecutionService
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
	e := &env{t: t, pool: pool, cfg: cfg, broker: dispatch.NewLeaseBroker(pool, n, cfg, nil, nil),
		jobs: queue.NewJobService(pool, nil), execs: queue.NewExecutionService(pool, nil, nil)}
	e.keyID = e.apiKey()
	return e
}

func (e *env) apiKey() uuid.UUID {
	e.t.Helper()
	hash := make([]byte, 32)
	_, _ = rand.Read(hash)
	key, err := db.APIKeyInsert(context.Background(), e.pool, &db.APIKeyInsertParams{
		ID: uuid.New(), Name: "agents", Hash: hash, Prefix: "ax_test", Scopes: []string{"agent"}})
	require.NoError(e.t, err)
	return key.ID
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
	j := &axtype.Job{Name: "job-" + uuid.NewString()[:8], Group: "default", TriggerKind: axtype.TriggerManual, Timezone: "UTC",
		ExecutorKind: "shell", Executor: axtype.ExecutorConfig{Command: "true"}, RouteStrategy: "round_robin",
		ShardCount: 1, TimeoutSeconds: 60, RetryMaxAttempts: 1, RetryBackoffSeconds: 0, RetryBackoffMaxSeconds: 0,
		ConcurrencyPolicy: "allow", MisfirePolicy: "fire_once", MisfireWindowSeconds: 3600, MisfireMaxFires: 100,
		DegradeAction: "wait", ShardRangeTo: axtype.DefaultShardRangeTo}
	if mutate != nil {
		mutate(j)
	}
	created, err := e.jobs.Create(context.Background(), j)
	require.NoError(e.t, err)
	return created
}

func (e *env) trigger(jobID uuid.UUID) *axtype.Execution {
	e.t.Helper()
	exec, _, err := e.execs.Trigger(context.Background(), &queue.TriggerRequest{JobID: jobID})
	require.NoError(e.t, err)
	return exec
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

// pollWaiting waits until a long poll of this test's database has checked
// for leasable tasks since since and gone to sleep: the connection that
// ran TaskNextLeasable sits idle with it as its last statement. It looks
// through a connection of its own: one from the pool could be the poll's,
// and its own query would hide the poll's.
func (e *env) pollWaiting(since time.Time) {
	e.t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig)
	require.NoError(e.t, err)
	defer conn.Close(ctx)
	e.eventually(func() bool {
		var n int
		require.NoError(e.t, conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle' AND state_change > $1
			  AND query LIKE '-- name: TaskNextLeasable %'`, since).Scan(&n))
		return n > 0
	}, "the long poll to wait")
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
	cfg := e.pool.Config().Copy()
	cfg.ConnConfig.Tracer = tracer
	traced, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(e.t, err)
	e.t.Cleanup(traced.Close)
	return dispatch.NewLeaseBroker(traced, nil, e.cfg, nil, nil)
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
