package db_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// beforeHistory is the last migration before history moved out of the
// live tables (00024).
const beforeHistory = 18

// The upgrade's data: finished runs of one shard with two state events
// each, and unfinished ones, half pending and half running with a
// leased task.
const (
	upgradeFinished = 100_000
	upgradePending  = 500
	upgradeRunning  = 500
	// Every tenth finished run has a delivered callback of one attempt;
	// skip records were made over 50 days.
	upgradeSkips = 5000
)

// TestUpgradeMovesHistory: a database at version 18 holding 100,000
// finished runs and 1,000 unfinished ones is migrated to the latest
// version. Every execution and task is still there with every column as
// it was (compared row by row through a digest of their JSON): the
// finished ones in the history tables, kept at least a day from the
// upgrade, the unfinished ones in the live tables; the events,
// callbacks, attempts and skip records are untouched (in partitioned
// tables since 00026). The unfinished runs are then leased and completed
// through db and move to history as they end (their events, of ids not
// made by ax, land in the partitions that catch those).
func TestUpgradeMovesHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := emptyDatabase(t)
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()
	for {
		res, err := m.UpByOne(ctx)
		require.NoError(t, err)
		if res.Source.Version == beforeHistory {
			break
		}
	}

	agentID, jobID := seedUpgradeRuns(t, pool)
	// The columns of version 18: later migrations add columns (with
	// defaults), which the digests leave out.
	execCols := columnNames(t, pool, "ax.execution")
	taskCols := columnNames(t, pool, "ax.task")
	eventCols := columnNames(t, pool, "ax.task_event")
	execDigest := digest(t, pool, "ax.execution", execCols)
	taskDigest := digest(t, pool, "ax.task", taskCols)
	eventDigest := digest(t, pool, "ax.task_event", eventCols)
	// Events, callbacks, attempts and skip records move to partitioned
	// tables (00026): every row, column for column.
	keyed := map[string][]string{}
	keyedDigests := map[string]string{}
	for _, rel := range []string{"ax.callback", "ax.callback_attempt", "ax.skipped_fire"} {
		keyed[rel] = columnNames(t, pool, rel)
		keyedDigests[rel] = digest(t, pool, rel, keyed[rel])
	}
	maxIDs := map[string]int64{}
	for _, rel := range []string{"ax.task_event", "ax.callback_attempt", "ax.skipped_fire"} {
		maxIDs[rel] = maxID(t, pool, rel)
	}
	var upgradeStart time.Time
	require.NoError(t, pool.QueryRow(ctx, "SELECT now()").Scan(&upgradeStart))

	_, err = m.Up(ctx)
	require.NoError(t, err)

	// Nothing lost or changed: the same rows, column for column.
	require.Equal(t, execDigest, digest(t, pool, "ax.all_executions", execCols))
	require.Equal(t, taskDigest, digest(t, pool, "ax.all_tasks", taskCols))
	require.Equal(t, eventDigest, digest(t, pool, "ax.task_event", eventCols))
	for rel, cols := range keyed {
		require.Equal(t, keyedDigests[rel], digest(t, pool, rel, cols), rel)
	}
	require.Equal(t, int64(upgradeFinished/10), count(t, pool, "ax.callback"))
	require.Equal(t, int64(upgradeFinished/10), count(t, pool, "ax.callback_attempt"))
	require.Equal(t, int64(upgradeSkips), count(t, pool, "ax.skipped_fire"))
	// Their ids go on from where they were.
	for rel, max := range maxIDs {
		var next int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT nextval(pg_get_serial_sequence($1, 'id'))`, rel).Scan(&next), rel)
		require.Greater(t, next, max, rel)
	}

	// Each where it belongs: the finished runs and their tasks in history,
	// kept a day at least, a task as long as its execution.
	type placement struct {
		Live, History, ShortKept, TasksApart int
	}
	var got placement
	err = pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM ax.execution WHERE finished_at IS NULL)
		       + (SELECT count(*) FROM ax.task WHERE state IN ('pending', 'leased', 'running')),
		       (SELECT count(*) FROM ax.execution_history) + (SELECT count(*) FROM ax.task_history),
		       (SELECT count(*) FROM ax.execution_history WHERE retain_until < $1::timestamptz + interval '1 day'),
		       (SELECT count(*) FROM ax.task_history t JOIN ax.execution_history e ON e.id = t.execution_id
		        WHERE t.retain_until <> e.retain_until)`, upgradeStart).Scan(&got.Live, &got.History, &got.ShortKept, &got.TasksApart)
	require.NoError(t, err)
	require.Equal(t, placement{Live: 2 * (upgradePending + upgradeRunning), History: 2 * upgradeFinished}, got)
	require.Equal(t, int64(upgradePending+upgradeRunning), count(t, pool, "ax.execution"))
	require.Equal(t, int64(upgradePending+upgradeRunning), count(t, pool, "ax.task"))

	finishUnfinishedRuns(t, pool, agentID, jobID)
}

// finishUnfinishedRuns leases the pending tasks (dispatch.Lease, as the
// broker does), completes them and the tasks leased before the upgrade
// (db.TaskComplete with their tokens), and checks that their runs ended
// and moved to history.
func finishUnfinishedRuns(t *testing.T, pool *pgxpool.Pool, agentID, jobID uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	leased, err := dispatch.Lease(ctx, pool, &dispatch.LeaseParams{AgentID: agentID, AgentExecutors: []string{"shell"},
		Max: 2 * upgradePending, Lease: time.Minute})
	require.NoError(t, err)
	require.Len(t, leased, upgradePending)

	rows, err := pool.Query(ctx, `SELECT id, lease_token FROM ax.task WHERE state IN ('leased', 'running')`)
	require.NoError(t, err)
	refs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[axtype.TaskRef])
	require.NoError(t, err)
	require.Len(t, refs, upgradePending+upgradeRunning)
	results := make([]axtype.TaskResult, len(refs))
	for i, ref := range refs {
		results[i] = axtype.TaskResult{TaskRef: ref, State: axtype.TaskSucceeded}
	}
	done, err := db.TaskComplete(ctx, pool, results)
	require.NoError(t, err)
	require.Len(t, done, len(results))
	for _, d := range done {
		require.True(t, d.Finalized, "task %s did not end its execution", d.ID)
	}

	require.Zero(t, count(t, pool, "ax.execution"))
	require.Zero(t, count(t, pool, "ax.task"))
	var moved, tasks int64
	err = pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM ax.execution_history
		        WHERE job_id = $1 AND state = 'succeeded' AND retain_until = finished_at + interval '7 days'),
		       (SELECT count(*) FROM ax.task_history WHERE job_id = $1 AND state = 'succeeded' AND agent_id = $2)`,
		jobID, agentID).Scan(&moved, &tasks)
	require.NoError(t, err)
	require.Equal(t, int64(upgradePending+upgradeRunning), moved)
	require.Equal(t, int64(upgradePending+upgradeRunning), tasks)
}

// seedUpgradeRuns writes, at version 18, the finished runs of a job that
// ended at every age up to 50 days in every final state, and the
// unfinished runs of another job, of which the running ones have their
// task leased to an agent; it returns the agent and the second job.
func seedUpgradeRuns(t *testing.T, pool *pgxpool.Pool) (agentID, jobID uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	err := pool.QueryRow(ctx, `
		WITH k AS (
		    INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		    VALUES ('upgrade', sha256('upgrade'), 'ax_upgr', '{agent}') RETURNING id
		)
		INSERT INTO ax.agent (id, name, capacity, api_key_id, executors)
		SELECT gen_random_uuid(), 'upgrade-agent', 10000, id, '{shell}' FROM k RETURNING id`).Scan(&agentID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		WITH j AS (
		    INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		    VALUES ('old', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id
		), r AS (
		    SELECT i, gen_random_uuid() AS id, j.id AS job_id,
		           (ARRAY['succeeded', 'failed', 'timed_out', 'cancelled'])[1 + i % 4] AS state,
		           now() - (i % 50) * interval '1 day' - i * interval '10 milliseconds' AS finished_at
		    FROM generate_series(1, $1::int) i, j
		), e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, fired_at, state, params, shard_count, priority,
		                              started_at, finished_at, error, traceparent)
		    SELECT id, job_id, 'schedule', finished_at - interval '3 seconds', finished_at - interval '2 seconds',
		           state::ax.execution_state, jsonb_build_object('n', i), 1, i % 5,
		           finished_at - interval '1 second', finished_at,
		           CASE WHEN state <> 'succeeded' THEN 'shard 0 ' || state END,
		           CASE WHEN i % 3 = 0 THEN '00-' || md5('trace' || i) || '-' || left(md5('span' || i), 16) || '-01' END
		    FROM r
		), tk AS (
		    INSERT INTO ax.task (id, execution_id, job_id, shard_index, shard_total, state, priority, attempt, max_attempts,
		                         timeout_seconds, not_before, started_at, finished_at, result, error, agent_id, leased_at,
		                         preferred_agent_id, log_bytes)
		    SELECT md5('task' || r.i)::uuid, r.id, r.job_id, 0, 1, r.state::ax.task_state, r.i % 5, 1 + r.i % 3, 3,
		           60, r.finished_at - interval '2 seconds', r.finished_at - interval '1 second', r.finished_at,
		           CASE WHEN r.state = 'succeeded' THEN jsonb_build_object('out', r.i) END,
		           CASE WHEN r.state <> 'succeeded' THEN r.state END,
		           $2::uuid, r.finished_at - interval '1 second', $2::uuid, r.i % 4096
		    FROM r
		)
		INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, agent_id, message, at)
		SELECT md5('task' || r.i)::uuid, r.id, 0, 1 + r.i % 3, 'state', s.state, $2::uuid, s.message, s.at
		FROM r, LATERAL (VALUES ('leased'::ax.task_state, 'routed here', r.finished_at - interval '1 second'),
		                        (r.state::ax.task_state, '', r.finished_at)) s(state, message, at)`,
		upgradeFinished, agentID)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
		WITH c AS (
		    INSERT INTO ax.callback (execution_id, job_id, state, attempts, last_status, enqueued_at, delivered_at, created_at)
		    SELECT e.id, e.job_id, 'delivered', 1, 200, e.finished_at, e.finished_at + interval '1 second', e.finished_at
		    FROM ax.execution e WHERE e.finished_at IS NOT NULL AND (e.params ->> 'n')::int % 10 = 0
		    RETURNING execution_id, delivered_at
		), a AS (
		    INSERT INTO ax.callback_attempt (execution_id, delivery, attempt, url, at, status_code, latency_ms)
		    SELECT execution_id, 1, 1, 'https://hooks.example/done', delivered_at, 200, 12.5 FROM c
		)
		INSERT INTO ax.skipped_fire (job_id, reason, first_tick, last_tick, tick_count, detail, recorded_at)
		SELECT j.id, (ARRAY['misfire', 'overlap', 'paused', 'dst_gap'])[1 + i % 4]::ax.skip_reason,
		       now() - i * interval '15 minutes', now() - i * interval '15 minutes' + interval '1 minute',
		       1 + i % 3, 'skip ' || i, now() - i * interval '14 minutes'
		FROM generate_series(1, $1::int) i, ax.job j WHERE j.name = 'old'`, upgradeSkips)
	require.NoError(t, err)
	err = pool.QueryRow(ctx, `
		WITH j AS (
		    INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		    VALUES ('in flight', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id
		), r AS (
		    SELECT i, gen_random_uuid() AS id, j.id AS job_id, i > $1 AS running
		    FROM generate_series(1, $1::int + $2::int) i, j
		), e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, state, shard_count, priority, started_at)
		    SELECT id, job_id, 'manual', now() - interval '1 minute',
		           CASE WHEN running THEN 'running' ELSE 'pending' END::ax.execution_state, 1, 0,
		           CASE WHEN running THEN now() - interval '30 seconds' END
		    FROM r
		), tk AS (
		    INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, state, priority, max_attempts,
		                         timeout_seconds, not_before, started_at, agent_id, lease_token, lease_expires_at, leased_at)
		    SELECT id, job_id, 0, 1, CASE WHEN NOT running THEN 'pending' WHEN i % 2 = 0 THEN 'running' ELSE 'leased' END::ax.task_state,
		           0, 3, 600, now() - interval '1 minute',
		           CASE WHEN running AND i % 2 = 0 THEN now() - interval '20 seconds' END,
		           CASE WHEN running THEN $3::uuid END, CASE WHEN running THEN gen_random_uuid() END,
		           CASE WHEN running THEN now() + interval '1 hour' END, CASE WHEN running THEN now() - interval '30 seconds' END
		    FROM r
		)
		SELECT id FROM j`, upgradePending, upgradeRunning, agentID).Scan(&jobID)
	require.NoError(t, err)
	return agentID, jobID
}

// digest is an md5 of every row of rel as the text of a row of the
// columns cols, in id order (execution_id for callbacks): equal digests
// are equal rows.
func digest(t *testing.T, pool *pgxpool.Pool, rel string, cols []string) string {
	t.Helper()
	order := "id"
	if !slices.Contains(cols, "id") {
		order = "execution_id"
	}
	quoted := make([]string, len(cols))
	for i, c := range cols {
		quoted[i] = pgx.Identifier{c}.Sanitize()
	}
	var d string
	err := pool.QueryRow(context.Background(), `
		SELECT md5(string_agg(ROW(`+strings.Join(quoted, ", ")+`)::text, ',' ORDER BY `+order+`))
		FROM `+rel).Scan(&d)
	require.NoError(t, err)
	return d
}

// columnNames lists the column names of a table.
func columnNames(t *testing.T, pool *pgxpool.Pool, rel string) []string {
	t.Helper()
	return queryStrings(t, pool, `SELECT attname::text FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, rel)
}

// maxID is the highest id of rel.
func maxID(t *testing.T, pool *pgxpool.Pool, rel string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT coalesce(max(id), 0) FROM "+rel).Scan(&n))
	return n
}

func count(t *testing.T, pool *pgxpool.Pool, rel string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM "+rel).Scan(&n))
	return n
}
