package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestLeaseManyHandsEachAgentWhatItMayTake: one coalesced lease for four
// agents honours what separate leases would: routed tasks go to their
// agent (not to another before the steal delay), no agent gets more than
// it asked for, targeted jobs go to agents of their labels only, a
// drained agent gets nothing (and its share goes to the others), a task
// one group of agents took is not picked again for another, and every
// task is leased once, to the agent it was handed to.
func TestLeaseManyHandsEachAgentWhatItMayTake(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var keyID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('many', sha256('many'), 'ax_many', '{agent}') RETURNING id`).Scan(&keyID))
	agent := func(name, labels, state string) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, labels, state)
			VALUES (gen_random_uuid(), $1, 10, $2, '{shell}', $3::jsonb, $4::ax.agent_state) RETURNING id`,
			name, keyID, labels, state).Scan(&id))
		return id
	}
	a, b := agent("a", `{"pool": "a"}`, "active"), agent("b", `{"pool": "a"}`, "active")
	c, drained := agent("c", `{"pool": "c"}`, "active"), agent("d", `{"pool": "a"}`, "draining")
	job := func(targets string) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless, target_labels)
			VALUES ($1, 'manual', 'shell', '{"kind": "shell", "command": "true"}', false, $2::jsonb) RETURNING id`,
			"job-"+uuid.NewString()[:8], targets).Scan(&id))
		return id
	}
	anyone, poolC := job(`{}`), job(`{"pool": "c"}`)
	task := func(jobID uuid.UUID, preferred *uuid.UUID) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `
			WITH e AS (
			    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
			    VALUES (gen_random_uuid(), $1, 'manual', now(), 1, 0) RETURNING id, job_id
			)
			INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
			                     preferred_agent_id, not_before)
			SELECT id, job_id, 0, 1, 0, 1, 60, $2, now() - interval '1 second' FROM e RETURNING id`, jobID, preferred).Scan(&id))
		return id
	}
	routedA := []uuid.UUID{task(anyone, &a), task(anyone, &a)}
	routedB := []uuid.UUID{task(anyone, &b), task(anyone, &b)}
	unassigned := []uuid.UUID{task(anyone, nil), task(anyone, nil)}
	forC := task(poolC, nil)

	got, err := dispatch.LeaseMany(ctx, pool, &dispatch.LeaseBatch{
		Agents: []axtype.LeaseAgent{
			{ID: a, Labels: map[string]string{"pool": "a"}, Executors: []string{"shell"}, Max: 3},
			{ID: b, Labels: map[string]string{"pool": "a"}, Executors: []string{"shell"}, Max: 1},
			{ID: c, Labels: map[string]string{"pool": "c"}, Executors: []string{"shell"}, Max: 2},
			{ID: drained, Labels: map[string]string{"pool": "a"}, Executors: []string{"shell"}, Max: 2},
		},
		Lease: 30 * time.Second, StealAfter: time.Minute, StarveAfter: time.Hour})
	require.NoError(t, err)
	require.Len(t, got, 4)
	leasedTo := map[uuid.UUID]uuid.UUID{}
	for i, id := range []uuid.UUID{a, b, c, drained} {
		for _, lt := range got[i] {
			_, twice := leasedTo[lt.ID]
			require.False(t, twice, "task %s leased twice", lt.ID)
			leasedTo[lt.ID] = id
		}
	}
	require.Len(t, got[0], 3, "a asked for 3")
	require.Equal(t, a, leasedTo[routedA[0]], "a's routed tasks go to a")
	require.Equal(t, a, leasedTo[routedA[1]])
	require.Len(t, got[1], 1, "b asked for 1")
	require.Contains(t, routedB, got[1][0].ID, "b gets one of its own routed tasks first")
	for _, id := range routedB {
		require.NotEqual(t, a, leasedTo[id], "a takes no task routed to b before the steal delay")
		require.NotEqual(t, c, leasedTo[id])
	}
	require.Equal(t, c, leasedTo[forC], "the pool-c job's task goes to c")
	require.Empty(t, got[3], "a draining agent gets nothing")
	require.LessOrEqual(t, len(got[2]), 2)
	for _, id := range unassigned {
		holder, ok := leasedTo[id]
		require.True(t, ok, "the draining agent's share goes to the others: every unassigned task is leased")
		require.Contains(t, []uuid.UUID{a, c}, holder)
	}
	requireHolders(t, pool, leasedTo)
}

// requireHolders checks that each task is leased to the agent it maps to,
// and that no other task is leased.
func requireHolders(t *testing.T, pool *pgxpool.Pool, want map[uuid.UUID]uuid.UUID) {
	t.Helper()
	rows, err := pool.Query(context.Background(), "SELECT id, agent_id FROM ax.task WHERE state = 'leased'")
	require.NoError(t, err)
	got := map[uuid.UUID]uuid.UUID{}
	for rows.Next() {
		var id, agentID uuid.UUID
		require.NoError(t, rows.Scan(&id, &agentID))
		got[id] = agentID
	}
	require.NoError(t, rows.Err())
	require.Equal(t, want, got)
}

// An agent drained after a coalesced lease handed it tasks (between its
// check of the agents and the lease statement) gets none of them, and
// their runs do not start: only runs of tasks leased are marked running.
func TestLeaseManyStartsOnlyTheRunsItLeases(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var keyID, jobID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('race', sha256('race'), 'ax_race', '{agent}') RETURNING id`).Scan(&keyID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		VALUES ('race', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id`).Scan(&jobID))
	agent := func(name string) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.agent (id, name, capacity, api_key_id, executors)
			VALUES (gen_random_uuid(), $1, 10, $2, '{shell}') RETURNING id`, name, keyID).Scan(&id))
		return id
	}
	stays, drained := agent("stays"), agent("drained")
	_, err := pool.Exec(ctx, `
		WITH e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		    SELECT gen_random_uuid(), $1, 'manual', now(), 1, 0 FROM generate_series(1, 2) RETURNING id, job_id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds, not_before)
		SELECT id, job_id, 0, 1, 0, 1, 60, now() - interval '1 second' FROM e`, jobID)
	require.NoError(t, err)

	cfg := pool.Config().Copy()
	cfg.ConnConfig.Tracer = &drainBeforeLease{pool: pool, agentID: drained}
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer traced.Close()
	got, err := dispatch.LeaseMany(ctx, traced, &dispatch.LeaseBatch{
		Agents: []axtype.LeaseAgent{{ID: stays, Executors: []string{"shell"}, Max: 1},
			{ID: drained, Executors: []string{"shell"}, Max: 1}},
		Lease: 30 * time.Second, StealAfter: time.Minute, StarveAfter: time.Hour})
	require.NoError(t, err)
	require.Len(t, got[0], 1, "the agent that stays active gets its task")
	require.Empty(t, got[1], "the agent drained meanwhile gets nothing")
	var running, pending int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'running'),
		count(*) FILTER (WHERE state = 'pending') FROM ax.execution`).Scan(&running, &pending))
	require.Equal(t, 1, running, "the run of the leased task started")
	require.Equal(t, 1, pending, "the run of the task the drained agent was handed did not")
}

// drainBeforeLease drains an agent, in a transaction of its own, just
// before the lease statement runs.
type drainBeforeLease struct {
	pool    *pgxpool.Pool
	agentID uuid.UUID
}

func (d *drainBeforeLease) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, "-- name: TaskLeaseTake ") {
		if _, err := d.pool.Exec(ctx, "UPDATE ax.agent SET state = 'draining' WHERE id = $1", d.agentID); err != nil {
			panic(err)
		}
	}
	return ctx
}

func (d *drainBeforeLease) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
