package queue_test

import (
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/google/uuid"
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

// env is the API's services on a fresh database, with a notifier that is
// listening by the time setup returns, and a lease broker to play agent.
type env struct {
	t        *testing.T
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	jobs     *queue.JobService
	execs    *queue.ExecutionService
	broker   *dispatch.LeaseBroker
}

func setup(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	pool := dbtest.New(t)
	n := notify.NewNotifier(pool, nil, notify.JobChangedChannel, notify.ExecutionEndedChannel, notify.TaskReadyChannel)
	// The notifier wakes every subscriber once it listens: after that
	// wake-up no notification can be missed.
	listening, unsubscribe := n.Subscribe(notify.JobChangedChannel)
	defer unsubscribe()
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("the notifier did not start listening")
	}
	return &env{t: t, pool: pool, notifier: n, jobs: queue.NewJobService(pool, nil),
		execs: queue.NewExecutionService(pool, nil, nil), broker: dispatch.NewLeaseBroker(pool, nil, dispatch.AgentConfig{}, nil, nil)}
}

// newJob is a manual shell job definition; mutate adjusts it.
func newJob(mutate func(j *axtype.Job)) *axtype.Job {
	j := &axtype.Job{Name: "job-" + uuid.NewString()[:8], Group: "default", TriggerKind: axtype.TriggerManual, Timezone: "UTC",
		ExecutorKind: "shell", Executor: axtype.ExecutorConfig{Command: "true"}, RouteStrategy: "round_robin",
		ShardCount: 1, TimeoutSeconds: 60, RetryMaxAttempts: 1, RetryBackoffSeconds: 0, RetryBackoffMaxSeconds: 0,
		ConcurrencyPolicy: "allow", MisfirePolicy: "fire_once", MisfireWindowSeconds: 3600, MisfireMaxFires: 100,
		DegradeAction: "wait", ShardRangeTo: axtype.DefaultShardRangeTo}
	if mutate != nil {
		mutate(j)
	}
	return j
}

func (e *env) job(mutate func(j *axtype.Job)) *axtype.Job {
	e.t.Helper()
	created, err := e.jobs.Create(context.Background(), newJob(mutate))
	require.NoError(e.t, err)
	return created
}

func (e *env) trigger(jobID uuid.UUID) *axtype.Execution {
	e.t.Helper()
	exec, replayed, err := e.execs.Trigger(context.Background(), &queue.TriggerRequest{JobID: jobID})
	require.NoError(e.t, err)
	require.False(e.t, replayed)
	return exec
}

func (e *env) apiKey() uuid.UUID {
	e.t.Helper()
	hash := make([]byte, 32)
	_, _ = rand.Read(hash)
	key, err := db.APIKeyInsert(context.Background(), e.pool, &db.APIKeyInsertParams{
		ID: uuid.New(), Name: "key-" + uuid.NewString()[:8], Hash: hash, Prefix: "ax_test", Scopes: []string{"submit"}})
	require.NoError(e.t, err)
	return key.ID
}

// agent registers a ready shell agent.
func (e *env) agent() *axtype.Agent {
	e.t.Helper()
	ctx := context.Background()
	a, err := e.broker.Register(ctx, &axtype.Agent{Name: "agent-" + uuid.NewString()[:8], Capacity: 10, APIKeyID: e.apiKey(),
		Executors: []string{"shell"}})
	require.NoError(e.t, err)
	ready := true
	_, err = e.broker.Heartbeat(ctx, a.ID, nil, &axtype.AgentLoad{Ready: &ready})
	require.NoError(e.t, err)
	a.Ready = true
	return a
}

func (e *env) execution(id uuid.UUID) *axtype.Execution {
	e.t.Helper()
	exec, err := db.ExecutionGetByID(context.Background(), e.pool, id)
	require.NoError(e.t, err)
	return exec
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), sql, args...)
	require.NoError(e.t, err)
}

// woken waits up to 10 s for ch.
func woken(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	case <-time.After(10 * time.Second):
		return false
	}
}
