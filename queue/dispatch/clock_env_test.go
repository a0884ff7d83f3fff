package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// clockEnv is the lease broker and the reaper on a database of their own,
// sharing a clock the test moves instead of waiting.
type clockEnv struct {
	t      *testing.T
	pool   *pgxpool.Pool
	clock  *clock.Clock
	cfg    dispatch.AgentConfig
	broker *dispatch.LeaseBroker
	reaper *dispatch.Reaper
	jobs   *queue.JobService
	execs  *queue.ExecutionService
}

func setupClock(t *testing.T) *clockEnv {
	t.Helper()
	pool := dbtest.New(t)
	c := clock.New()
	cfg := dispatch.AgentConfig{Lease: 30 * time.Second, StealAfter: 10 * time.Second}
	return &clockEnv{t: t, pool: pool, clock: c, cfg: cfg,
		broker: dispatch.NewLeaseBroker(pool, nil, cfg, nil, nil).WithClock(c),
		reaper: dispatch.NewReaper(pool, cfg, dispatch.ReaperConfig{Clock: c}),
		jobs:   queue.NewJobService(pool, nil), execs: queue.NewExecutionService(pool, nil, nil)}
}

// trigger creates a shell job that may run attempts times, with retryBackoff
// between them, and fires it once; it returns the run's one task.
func (e *clockEnv) trigger(attempts int, retryBackoff time.Duration) *axtype.Task {
	e.t.Helper()
	return e.fire(e.job(attempts, retryBackoff))
}

// job creates a shell job of one shard that may run attempts times, with
// retryBackoff between them.
func (e *clockEnv) job(attempts int, retryBackoff time.Duration) *axtype.Job {
	e.t.Helper()
	secs := int(retryBackoff.Seconds())
	job, err := e.jobs.Create(context.Background(), &axtype.Job{Name: "job-" + uuid.NewString()[:8], Group: "default",
		TriggerKind: axtype.TriggerManual, Timezone: "UTC", ExecutorKind: "shell", Executor: axtype.ExecutorConfig{Command: "true"},
		RouteStrategy: "round_robin", ShardCount: 1, TimeoutSeconds: 3600, RetryMaxAttempts: attempts,
		RetryBackoffSeconds: secs, RetryBackoffMaxSeconds: secs, ConcurrencyPolicy: "allow",
		MisfirePolicy: "fire_once", MisfireWindowSeconds: 3600, MisfireMaxFires: 100, DegradeAction: "wait", ShardRangeTo: axtype.DefaultShardRangeTo})
	require.NoError(e.t, err)
	return job
}

// fire runs job once; it returns the run's one task.
func (e *clockEnv) fire(job *axtype.Job) *axtype.Task {
	e.t.Helper()
	ctx := context.Background()
	exec, _, err := e.execs.Trigger(ctx, &queue.TriggerRequest{JobID: job.ID})
	require.NoError(e.t, err)
	tasks, err := db.TaskListByExecution(ctx, e.pool, exec.ID)
	require.NoError(e.t, err)
	require.Len(e.t, tasks, 1)
	return tasks[0]
}

// agent registers a ready agent that takes every executor kind.
func (e *clockEnv) agent(name string) *axtype.Agent {
	e.t.Helper()
	ctx := context.Background()
	key, err := db.APIKeyInsert(ctx, e.pool, &db.APIKeyInsertParams{ID: uuid.New(), Name: name,
		Hash: []byte(uuid.NewString()), Prefix: "ax_", Scopes: []string{"agent"}})
	require.NoError(e.t, err)
	a, err := e.broker.Register(ctx, &axtype.Agent{Name: name, Capacity: 4, Weight: 1, APIKeyID: key.ID,
		Executors: []string{"shell", "http", "handler"}})
	require.NoError(e.t, err)
	e.heartbeat(a) // registered agents take work after a heartbeat says they are ready
	return a
}

// heartbeat says agent is alive and ready, at the clock's now.
func (e *clockEnv) heartbeat(a *axtype.Agent) {
	e.t.Helper()
	ready := true
	res, err := e.broker.Heartbeat(context.Background(), a.ID, nil, &axtype.AgentLoad{Ready: &ready})
	require.NoError(e.t, err)
	a.State, a.Ready = axtype.AgentState(res.State), true
}

// lease asks once, without waiting, for agent's tasks.
func (e *clockEnv) lease(a *axtype.Agent) []*axtype.LeasedTask {
	e.t.Helper()
	tasks, err := e.broker.Lease(context.Background(), a, 10, 0)
	require.NoError(e.t, err)
	return tasks
}

// sweep runs one reaper pass.
func (e *clockEnv) sweep() {
	e.t.Helper()
	require.NoError(e.t, e.reaper.Sweep(context.Background()))
}

// task reads a task's state and attempt.
func (e *clockEnv) task(id uuid.UUID) (state string, attempt int) {
	e.t.Helper()
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		"SELECT state::text, attempt FROM ax.all_tasks WHERE id = $1", id).Scan(&state, &attempt))
	return state, attempt
}
