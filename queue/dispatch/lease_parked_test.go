package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// keyedFixture is a database with one agent and one job whose tasks are
// written straight into ax.task with a concurrency key (scope
// job:parked: jobs of one group share it the same way).
type keyedFixture struct {
	t       *testing.T
	pool    *pgxpool.Pool
	agentID uuid.UUID
	jobID   uuid.UUID
}

func newKeyedFixture(t *testing.T) *keyedFixture {
	t.Helper()
	f := &keyedFixture{t: t, pool: dbtest.New(t)}
	ctx := context.Background()
	var keyID uuid.UUID
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('parked', sha256('parked'), 'ax_parked', '{agent}') RETURNING id`).Scan(&keyID))
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state)
		VALUES (gen_random_uuid(), 'parked', 10, $1, '{shell}', 'active') RETURNING id`, keyID).Scan(&f.agentID))
	require.NoError(t, f.pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		VALUES ('parked', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id`).Scan(&f.jobID))
	return f
}

// tasks writes a run of n tasks of key (limit lim) with e, in one
// statement, and returns their ids in shard order.
func (f *keyedFixture) tasks(e db.Executor, key string, lim, n int) []uuid.UUID {
	f.t.Helper()
	rows, err := e.Query(context.Background(), `
		WITH e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		    VALUES (gen_random_uuid(), $1, 'manual', now(), $4, 0) RETURNING id, job_id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     not_before, concurrency_scope, concurrency_key, concurrency_limit)
		SELECT id, job_id, i, $4, 0, 1, 60, now() - interval '1 second', 'job:parked', $2, $3
		FROM e, generate_series(0, $4 - 1) i
		ORDER BY i
		RETURNING id`, f.jobID, key, lim, n)
	require.NoError(f.t, err)
	ids := []uuid.UUID{}
	for rows.Next() {
		var id uuid.UUID
		require.NoError(f.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(f.t, rows.Err())
	return ids
}

// lease leases as an agent's long poll does, without waiting.
func (f *keyedFixture) lease() []*axtype.LeasedTask {
	f.t.Helper()
	return f.leaseUpTo(10)
}

func (f *keyedFixture) leaseUpTo(n int) []*axtype.LeasedTask {
	f.t.Helper()
	got, err := dispatch.Lease(context.Background(), f.pool, &dispatch.LeaseParams{AgentID: f.agentID,
		AgentExecutors: []string{"shell"}, Max: n, Lease: 30 * time.Second, StealAfter: time.Minute, StarveAfter: time.Hour})
	require.NoError(f.t, err)
	return got
}

func leasedIDs(tasks []*axtype.LeasedTask) []uuid.UUID {
	out := []uuid.UUID{}
	for _, lt := range tasks {
		out = append(out, lt.ID)
	}
	return out
}

// parked returns which of ids are parked.
func (f *keyedFixture) parked(ids ...uuid.UUID) []uuid.UUID {
	f.t.Helper()
	var out []uuid.UUID
	require.NoError(f.t, f.pool.QueryRow(context.Background(), `SELECT coalesce(array_agg(id ORDER BY shard_index), '{}')
		FROM ax.task WHERE id = ANY($1) AND key_parked AND state = 'pending'`, ids).Scan(&out))
	return out
}

func (f *keyedFixture) freedRecords() int {
	f.t.Helper()
	var n int
	require.NoError(f.t, f.pool.QueryRow(context.Background(), `SELECT count(*) FROM ax.concurrency_key_freed`).Scan(&n))
	return n
}

// TestLeaseParksBehindKeyLimit: a run of 4 tasks of one key of limit 2 is
// written with 2 ready and 2 parked (no record: the places are held by
// its own tasks); the lease takes the 2 ready ones and nothing more; a
// result frees a place, which the next lease unparks and leases (the
// shards in order); a later run of the key is parked behind the running
// ones; cancelling a ready task frees its place too.
func TestLeaseParksBehindKeyLimit(t *testing.T) {
	t.Parallel()
	f := newKeyedFixture(t)
	ctx := context.Background()
	ids := f.tasks(f.pool, "customer=acme", 2, 4)
	require.Equal(t, ids[2:], f.parked(ids...), "the tasks past the limit are parked as they are written")
	require.Zero(t, f.freedRecords(), "places held by the run's own tasks need no second look")

	first := f.lease()
	require.ElementsMatch(t, ids[:2], leasedIDs(first))
	require.Empty(t, f.lease(), "the key is at its limit")

	_, err := db.TaskComplete(ctx, f.pool, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: first[0].ID, Token: first[0].LeaseToken}, State: axtype.TaskSucceeded}})
	require.NoError(t, err)
	require.Equal(t, ids[2:], f.parked(ids...), "a freed place unparks nothing until a lease")
	require.Equal(t, []uuid.UUID{ids[2]}, leasedIDs(f.lease()), "the next lease unparks and leases the first waiting")
	require.Equal(t, []uuid.UUID{ids[3]}, f.parked(ids...))

	// A new run of the key: parked behind the 2 running (and recorded:
	// those are another transaction's, and may end while it is written).
	more := f.tasks(f.pool, "customer=acme", 2, 1)
	require.Equal(t, more, f.parked(more...))
	require.Positive(t, f.freedRecords())
	require.Empty(t, f.lease(), "looking again finds the key still full")
	require.Zero(t, f.freedRecords(), "the record was consumed")

	// A ready task that is cancelled frees its place: of two runs of
	// another key of limit 1, the first's task is ready, the second's
	// parked; cancelling the first run lets the second's be leased.
	ready := f.tasks(f.pool, "customer=dave", 1, 1)
	behind := f.tasks(f.pool, "customer=dave", 1, 1)
	require.Equal(t, behind, f.parked(behind...))
	var run uuid.UUID
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT execution_id FROM ax.task WHERE id = $1`, ready[0]).Scan(&run))
	_, err = db.ExecutionCancel(ctx, f.pool, []uuid.UUID{run}, nil, "test")
	require.NoError(t, err)
	require.Equal(t, behind, leasedIDs(f.lease()))
	require.Equal(t, more, f.parked(more...), "customer=acme is still full")
}

// TestLeaseKeysTakeTurns: keys of limit 1 — acme with 3 runs, then bob
// with 2, then carol with 1 — leased one task a call. acme's and bob's
// first go; when acme's ends, its second run is unparked, but it became
// ready after carol's, which goes first (oldest first would have run
// acme's whole backlog before carol's); then acme's second, and nothing
// more while acme's and bob's first hold their keys.
func TestLeaseKeysTakeTurns(t *testing.T) {
	t.Parallel()
	f := newKeyedFixture(t)
	ctx := context.Background()
	var acme, bob, carol []uuid.UUID
	for range 3 {
		acme = append(acme, f.tasks(f.pool, "customer=acme", 1, 1)...)
	}
	for range 2 {
		bob = append(bob, f.tasks(f.pool, "customer=bob", 1, 1)...)
	}
	carol = f.tasks(f.pool, "customer=carol", 1, 1)

	first := f.leaseUpTo(1)
	require.Equal(t, []uuid.UUID{acme[0]}, leasedIDs(first))
	require.Equal(t, []uuid.UUID{bob[0]}, leasedIDs(f.leaseUpTo(1)))
	_, err := db.TaskComplete(ctx, f.pool, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: acme[0], Token: first[0].LeaseToken}, State: axtype.TaskSucceeded}})
	require.NoError(t, err)

	next := f.leaseUpTo(1)
	require.Equal(t, []uuid.UUID{carol[0]}, leasedIDs(next), "carol's run waited longer than acme's second")
	require.Empty(t, f.parked(acme[1]), "acme's second was unparked by that lease")
	after := f.leaseUpTo(1)
	require.Equal(t, []uuid.UUID{acme[1]}, leasedIDs(after))
	assert.True(t, after[0].ReadyAt.After(next[0].ReadyAt), "ready when unparked: %s, after carol's %s",
		after[0].ReadyAt, next[0].ReadyAt)
	require.Empty(t, f.leaseUpTo(1), "acme and bob at their limits, carol's done leasing")
}

// TestLeaseUnparksTaskParkedWhileItsKeyFreed: a task is parked by a
// transaction while the key's running task ends in another, and a lease
// looks at the freed key before the first commits (it cannot see the
// parked task then). The parking transaction recorded the key itself, so
// the next lease after it commits unparks and leases the task: no task
// waits for a place that is free.
func TestLeaseUnparksTaskParkedWhileItsKeyFreed(t *testing.T) {
	t.Parallel()
	f := newKeyedFixture(t)
	ctx := context.Background()
	f.tasks(f.pool, "customer=bob", 1, 1)
	running := f.lease()
	require.Len(t, running, 1)

	tx, err := f.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	waiting := f.tasks(tx, "customer=bob", 1, 1)

	_, err = db.TaskComplete(ctx, f.pool, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: running[0].ID, Token: running[0].LeaseToken}, State: axtype.TaskSucceeded}})
	require.NoError(t, err)
	require.Empty(t, f.lease(), "the freed key is looked at: its waiting task is not committed yet")

	require.NoError(t, tx.Commit(ctx))
	require.Equal(t, waiting, leasedIDs(f.lease()))
}

// TestTasksWithoutAgentNameParkedTasks: a parked task is named in
// ax.tasks_without_agent with its key, as is any task whose key is full.
func TestTasksWithoutAgentNameParkedTasks(t *testing.T) {
	t.Parallel()
	f := newKeyedFixture(t)
	ctx := context.Background()
	ids := f.tasks(f.pool, "customer=carol", 1, 3)
	var reasons []string
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT array_agg(reason ORDER BY task_id) FROM ax.tasks_without_agent
		WHERE task_id = ANY($1)`, ids[1:]).Scan(&reasons))
	require.Equal(t, []string{"concurrency key customer=carol at limit 1", "concurrency key customer=carol at limit 1"}, reasons)
}

// TestLeaseBrokerWaitingPollGetsUnparkedTask: an agent's long poll waits
// while the only task it could take is parked behind a running one; when
// that one ends, the poll (woken by the notification, whose check sees the
// key freed) leases the waiting task within the same poll, though no
// other lease ran to unpark it.
func TestLeaseBrokerWaitingPollGetsUnparkedTask(t *testing.T) {
	t.Parallel()
	f := newKeyedFixture(t)
	ctx := context.Background()
	notifier := notify.NewNotifier(f.pool, nil, notify.ServeChannels()...)
	require.NoError(t, notifier.Start(ctx))
	t.Cleanup(notifier.Stop)
	broker := dispatch.NewLeaseBroker(f.pool, notifier, dispatch.AgentConfig{StealAfter: time.Minute}, nil, nil)
	_, err := f.pool.Exec(ctx, `UPDATE ax.agent SET ready = true WHERE id = $1`, f.agentID)
	require.NoError(t, err)
	agent, err := broker.Get(ctx, f.agentID)
	require.NoError(t, err)

	ids := f.tasks(f.pool, "customer=erin", 1, 2)
	running, err := broker.Lease(ctx, agent, 10, 0)
	require.NoError(t, err)
	require.Equal(t, ids[:1], leasedIDs(running))

	got := make(chan []*axtype.LeasedTask, 1)
	go func() {
		tasks, err := broker.Lease(ctx, agent, 10, 20*time.Second)
		assert.NoError(t, err)
		got <- tasks
	}()
	time.Sleep(200 * time.Millisecond) // the poll is waiting (nothing it may take)
	_, err = db.TaskComplete(ctx, f.pool, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: running[0].ID, Token: running[0].LeaseToken}, State: axtype.TaskSucceeded}})
	require.NoError(t, err)
	select {
	case tasks := <-got:
		require.Equal(t, ids[1:], leasedIDs(tasks))
	case <-time.After(15 * time.Second):
		t.Fatal("the waiting poll did not get the task its key's freed place unparked")
	}
}
