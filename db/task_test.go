package db_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestLeaseQueryIsIndexDriven: on 100,000 pending tasks the claim query
// reads the pending indexes, never the whole table.
func TestLeaseQueryIsIndexDriven(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var jobID, execID uuid.UUID
	err := pool.QueryRow(ctx, `
		WITH j AS (
		    INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		    VALUES ('big', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false)
		    RETURNING id
		)
		INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		SELECT gen_random_uuid(), id, 'manual', now(), 1, 0 FROM j
		RETURNING job_id, id`).Scan(&jobID, &execID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     not_before, preferred_agent_id)
		SELECT $1, $2, i, 100001, i % 10, 1, 60, now() - (i % 1000) * interval '1 second',
		       CASE WHEN i % 3 = 0 THEN gen_random_uuid() END
		FROM generate_series(1, 100000) AS i`, execID, jobID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `ANALYZE ax.task`)
	require.NoError(t, err)
	plan, err := db.TaskLeasePlan(ctx, pool, &db.TaskLeasePickParams{AgentIDs: []uuid.UUID{uuid.New()}, Maxes: []int{10},
		StealAfter: 2 * time.Second, StarveAfter: 5 * time.Minute, Executors: []string{"shell", "http", "handler"}})
	require.NoError(t, err)
	t.Log(plan)
	for _, line := range strings.Split(plan, "\n") {
		require.False(t, strings.Contains(line, "Seq Scan on task "), "no sequential scan of tasks:\n%s", plan)
	}
	for _, idx := range []string{"task_unassigned_idx", "task_preferred_idx", "task_pending_age_idx"} {
		require.True(t, slices.ContainsFunc(strings.Split(plan, "\n"), func(l string) bool { return strings.Contains(l, idx) }),
			"%s is used:\n%s", idx, plan)
	}

	// With many pools (migration 00079), an agent's are found through the
	// labels' index, not by reading them all.
	_, err = pool.Exec(ctx, `
		INSERT INTO ax.task_pool (target_labels, executor_kind, labels_digest)
		SELECT l, 'shell', md5(l::text)::uuid
		FROM (SELECT jsonb_build_object('pool', 'gpu', 'n', i::text) AS l FROM generate_series(1, 20000) AS i) x;
		ANALYZE ax.task_pool`)
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // reads only
	read := func() int64 {
		var n int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(idx_tup_fetch, 0) + seq_tup_read FROM pg_stat_xact_user_tables
			WHERE relid = 'ax.task_pool'::regclass`).Scan(&n))
		return n
	}
	before := read()
	var pools int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM ax.lease_pools('{"pool": "cpu", "zone": "a"}', '{shell}', false, '{}')`).
		Scan(&pools))
	require.Equal(t, 1, pools, "the untargeted pool")
	require.Less(t, read()-before, int64(100), "pool rows read to find an agent's")
}
