package db_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

// emptyDatabase returns a pool on a database no migration has touched.
func emptyDatabase(t *testing.T) *pgxpool.Pool {
	t.Helper()
	return dbtest.NewBlank(t)
}

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyDatabase(t)
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()

	status, err := m.Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, status)

	// Each migration goes up, down and up again on its own.
	for range status {
		applied := schemaObjects(t, pool)
		_, err := m.UpByOne(ctx)
		require.NoError(t, err)
		after := schemaObjects(t, pool)
		_, err = m.Down(ctx)
		require.NoError(t, err)
		require.Equal(t, applied, schemaObjects(t, pool), "down must restore the schema")
		_, err = m.UpByOne(ctx)
		require.NoError(t, err)
		require.Equal(t, after, schemaObjects(t, pool), "up again must rebuild the same schema")
	}
	pending, err := m.HasPending(ctx)
	require.NoError(t, err)
	require.False(t, pending)

	_, err = m.DownTo(ctx, 0)
	require.NoError(t, err)
	require.Empty(t, schemaObjects(t, pool), "all the way down leaves nothing of ax")
}

func TestMigrateConcurrentReplicas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyDatabase(t)

	// Replicas starting together, each with its own pool as separate
	// processes would have: the session lock lets one migrate while the
	// others wait and then find nothing to do.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replica, err := pgxpool.New(ctx, pool.Config().ConnString())
			if err != nil {
				errs <- err
				return
			}
			defer replica.Close()
			errs <- db.Migrate(ctx, replica, nil)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()
	pending, err := m.HasPending(ctx)
	require.NoError(t, err)
	require.False(t, pending)
}

// schemaObjects lists the tables, types and indexes in schema ax.
func schemaObjects(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT c.relkind::text || ':' || c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'ax'
		  AND c.relname NOT LIKE 'schema_version%' -- goose's own, made before migration 1
		UNION ALL
		SELECT 'type:' || t.typname FROM pg_type t
		JOIN pg_namespace n ON n.oid = t.typnamespace
		WHERE n.nspname = 'ax' AND t.typtype = 'e'
		ORDER BY 1`)
	require.NoError(t, err)
	var out []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		out = append(out, s)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestMigrationParksKeyedBacklog: keyed tasks written before migration
// 00063 are parked by it past their key's places (its leased and running
// tasks, then its pending ones in lease order), and every parked key is
// recorded for the first lease to look at.
func TestMigrationParksKeyedBacklog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyDatabase(t)
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Up(ctx)
	require.NoError(t, err)
	for {
		res, err := m.Down(ctx)
		require.NoError(t, err)
		if res.Source.Version == 63 {
			break
		}
	}
	_, err = pool.Exec(ctx, `
		WITH j AS (INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		           VALUES ('backlog', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id),
		     e AS (INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		           SELECT gen_random_uuid(), id, 'manual', now(), 6, 0 FROM j RETURNING id, job_id)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     state, lease_token, lease_expires_at, created_at, concurrency_scope, concurrency_key, concurrency_limit)
		SELECT e.id, e.job_id, x.i, 6, 0, 1, 60, x.state::ax.task_state,
		       CASE WHEN x.state = 'running' THEN gen_random_uuid() END, CASE WHEN x.state = 'running' THEN now() + interval '1 minute' END,
		       now() + x.i * interval '1 ms', 'job:x', x.key, x.lim
		FROM e, (VALUES (0, 'running', 'k', 1), (1, 'pending', 'k', 1), (2, 'pending', 'k', 1),
		                (3, 'pending', 'l', 2), (4, 'pending', 'l', 2), (5, 'pending', 'l', 2)) x(i, state, key, lim)`)
	require.NoError(t, err)
	_, err = m.Up(ctx)
	require.NoError(t, err)
	var parked []int32
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(shard_index ORDER BY shard_index) FROM ax.task WHERE key_parked`).Scan(&parked))
	require.Equal(t, []int32{1, 2, 5}, parked)
	var keys []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(DISTINCT concurrency_key ORDER BY concurrency_key) FROM ax.concurrency_key_freed`).Scan(&keys))
	require.Equal(t, []string{"k", "l"}, keys)
}

// TestMigrationsOfLiveTasks: what migrations 00071 and 00074 do to the
// tasks of a database with work in flight. 00071 records the params' size
// on every task of a live run that may be leased again (pending, leased,
// running). 00074 moves group-scoped concurrency keys into their job's
// group, and records every parked key of such a scope for the next lease
// to look at: team a's task, parked behind team b's running one under the
// old shared scope, would otherwise wait for a place of its new scope to
// free, which nothing would ever do.
func TestMigrationsOfLiveTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyDatabase(t)
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Up(ctx)
	require.NoError(t, err)
	_, err = m.DownTo(ctx, 70)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		WITH j AS (INSERT INTO ax.job (name, group_name, trigger_kind, executor_kind, executor, agentless)
		           VALUES ('export', 'team-a', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false),
		                  ('export', 'team-b', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false)
		           RETURNING id, group_name),
		     e AS (INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority, params)
		           SELECT gen_random_uuid(), id, 'manual', now(), 1, 0, '{"customer": "acme"}' FROM j
		           RETURNING id, job_id)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     state, lease_token, lease_expires_at, key_parked, concurrency_scope, concurrency_key, concurrency_limit)
		SELECT e.id, e.job_id, 0, 1, 0, 1, 60, CASE WHEN j.group_name = 'team-b' THEN 'running' ELSE 'pending' END::ax.task_state,
		       CASE WHEN j.group_name = 'team-b' THEN gen_random_uuid() END,
		       CASE WHEN j.group_name = 'team-b' THEN now() + interval '1 minute' END,
		       j.group_name = 'team-a', 'group:exports', 'customer=acme', 1
		FROM e JOIN j ON j.id = e.job_id`)
	require.NoError(t, err)
	_, err = m.Up(ctx)
	require.NoError(t, err)
	rows, err := pool.Query(ctx, `SELECT t.state::text, t.params_bytes, t.concurrency_scope FROM ax.task t ORDER BY t.state`)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var state, scope string
		var size *int32
		require.NoError(t, rows.Scan(&state, &size, &scope))
		require.NotNil(t, size, state)
		got = append(got, fmt.Sprintf("%s %d %s", state, *size, scope))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"pending 20 group:team-a/exports", "running 20 group:team-b/exports"}, got)
	var freed []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(concurrency_scope || ' ' || concurrency_key)
		FROM ax.concurrency_key_freed`).Scan(&freed))
	require.Equal(t, []string{"group:team-a/exports customer=acme"}, freed)
}
