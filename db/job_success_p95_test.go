package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// An adaptive job's measure reads its successes as ax writes them since
// migration 00067 (the end on the task's row) and as it wrote them
// before (a success event with its duration), so an upgrade keeps the
// history it measures; failures and other jobs' runs are not counted.
func TestJobSuccessP95ReadsBothLayouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	job := testfactory.Job(ctx, t, pool, nil)
	other := testfactory.Job(ctx, t, pool, nil)

	dbtest.EndedRuns(t, pool, job.ID, time.Minute, "succeeded", 1*time.Second, 2*time.Second)
	dbtest.EndedRuns(t, pool, job.ID, time.Minute, "failed", time.Hour)
	dbtest.EndedRuns(t, pool, other.ID, time.Minute, "succeeded", time.Hour)
	// Two runs as written before 00067: no end on the task, an event.
	_, err := pool.Exec(ctx, `
		WITH runs AS (
		    SELECT gen_random_uuid() AS id, gen_random_uuid() AS task_id, ms,
		           now() - interval '2 minutes' AS finished_at
		    FROM unnest('{3000,40000}'::bigint[]) AS ms
		), execs AS (
		    INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, state, shard_count, priority,
		                                      started_at, finished_at, retain_until)
		    SELECT id, $1, 'manual', finished_at, 'succeeded', 1, 0, finished_at, finished_at,
		           finished_at + interval '7 days'
		    FROM runs
		), tasks AS (
		    INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, state, priority,
		                                 max_attempts, timeout_seconds, leased_at, finished_at, retain_until)
		    SELECT task_id, id, $1, 0, 1, 'succeeded', 0, 1, 3600, finished_at, finished_at,
		           finished_at + interval '7 days'
		    FROM runs
		)
		INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message, at, duration_ms)
		SELECT task_id, id, 0, 1, 'state', 'succeeded', '', finished_at, ms FROM runs`, job.ID)
	require.NoError(t, err)

	var samples int
	var p95 int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT samples, p95_ms FROM ax.job_success_p95($1)", job.ID).
		Scan(&samples, &p95))
	require.Equal(t, 4, samples, "two successes of each layout")
	require.EqualValues(t, 40000, p95, "the slowest of four is the 95th percentile")

	var none uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, "SELECT samples FROM ax.job_success_p95($1)", none).Scan(&samples))
	require.Zero(t, samples)
}
