package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestLeaseKeyedGroupOfMixedLimits: jobs of different limits share a
// group's key, and each task is held to its own limit against all the
// key's running tasks: with 1 running, a task of limit 1 waits while one
// of limit 3 is leased; with 2 running, one of limit 2 waits while one of
// limit 3 is leased; with 3 running, every task waits.
func TestLeaseKeyedGroupOfMixedLimits(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var keyID, agentID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('keyed', sha256('keyed'), 'ax_keyed', '{agent}') RETURNING id`).Scan(&keyID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state)
		VALUES (gen_random_uuid(), 'keyed', 10, $1, '{shell}', 'active') RETURNING id`, keyID).Scan(&agentID))
	var jobID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		VALUES ('keyed', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id`).Scan(&jobID))
	task := func(limit int) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `
			WITH e AS (
			    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
			    VALUES (gen_random_uuid(), $1, 'manual', now(), 1, 0) RETURNING id, job_id
			)
			INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
			                     not_before, concurrency_scope, concurrency_key, concurrency_limit)
			SELECT id, job_id, 0, 1, 0, 1, 60, now() - interval '1 second', 'group:exports', 'customer=acme', $2
			FROM e RETURNING id`, jobID, limit).Scan(&id))
		return id
	}
	lease := func() []uuid.UUID {
		got, err := dispatch.Lease(ctx, pool, &dispatch.LeaseParams{AgentID: agentID, AgentExecutors: []string{"shell"},
			Max: 10, Lease: 30 * time.Second, StealAfter: time.Minute, StarveAfter: time.Hour})
		require.NoError(t, err)
		var out []uuid.UUID
		for _, lt := range got {
			out = append(out, lt.ID)
		}
		return out
	}
	require.Equal(t, []uuid.UUID{task(3)}, lease())
	one := task(1)
	require.Equal(t, []uuid.UUID{task(3)}, lease(), "1 running: the task of limit 1 waits")
	two := task(2)
	require.Equal(t, []uuid.UUID{task(3)}, lease(), "2 running: the task of limit 2 waits")
	task(3)
	require.Empty(t, lease(), "3 running: every task waits")
	var pending int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ax.task WHERE id = ANY($1) AND state = 'pending'`,
		[]uuid.UUID{one, two}).Scan(&pending))
	require.Equal(t, 2, pending)
}
