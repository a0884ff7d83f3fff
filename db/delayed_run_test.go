package db_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestDeleteCancelledRunsReadsOnlyThem: with 20,000 runs waiting, the
// cleanup's delete of runs cancelled over a day ago reads them through
// their index, not the whole table, and leaves the pending runs and those
// cancelled within the day.
func TestDeleteCancelledRunsReadsOnlyThem(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	_, err := pool.Exec(ctx, `
		WITH j AS (
		    INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		    VALUES ('close-order', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id
		)
		INSERT INTO ax.delayed_run (id, job_id, run_at, cancelled_at, cancel_reason)
		SELECT gen_random_uuid(), j.id, now() + i * interval '1 second',
		       CASE WHEN i % 1000 = 0 THEN now() - interval '2 days' WHEN i % 1000 = 1 THEN now() END,
		       CASE WHEN i % 1000 IN (0, 1) THEN 'paid' END
		FROM generate_series(1, 20000) i, j`)
	require.NoError(t, err)

	var plan strings.Builder
	rows, err := pool.Query(ctx, "EXPLAIN DELETE FROM ax.delayed_run WHERE cancelled_at < now() - interval '1 day'")
	require.NoError(t, err)
	for rows.Next() {
		var line string
		require.NoError(t, rows.Scan(&line))
		plan.WriteString(line + "\n")
	}
	require.NoError(t, rows.Err())
	require.Contains(t, plan.String(), "delayed_run_cancelled_idx", "the delete reads every run:\n%s", plan.String())

	deleted, err := db.DelayedRunDeleteCancelled(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, int64(20), deleted, "the runs cancelled two days ago")
	var pending, cancelled int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE cancelled_at IS NULL),
		count(*) FILTER (WHERE cancelled_at IS NOT NULL) FROM ax.delayed_run`).Scan(&pending, &cancelled))
	require.Equal(t, 19960, pending)
	require.Equal(t, 20, cancelled, "cancelled within the day: kept")
}

// DelayedRunInsertMany sends the runs' params as one JSON array: each run
// gets its own (jsonb's text of it), and a run without stores none (NULL).
func TestDelayedRunInsertManyParams(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var jobID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		VALUES ('j', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id`).Scan(&jobID))
	params := []string{"", `{"n": 12345678901234567890}`, "", `{"a": [1, {"b": null}], "s": "😀"}`}
	runs := make([]*axtype.DelayedRun, len(params))
	for i, p := range params {
		runs[i] = &axtype.DelayedRun{ID: uuid.Must(uuid.NewV7()), JobID: jobID, RunAt: time.Now().Add(time.Hour)}
		if p != "" {
			runs[i].Params = []byte(p)
		}
	}
	require.NoError(t, db.DelayedRunInsertMany(ctx, pool, runs))
	for i, r := range runs {
		var stored *string
		require.NoError(t, pool.QueryRow(ctx, "SELECT params::text FROM ax.delayed_run WHERE id = $1", r.ID).Scan(&stored))
		if params[i] == "" {
			require.Nil(t, stored, "run %d", i)
			continue
		}
		require.NotNil(t, stored, "run %d", i)
		require.Equal(t, params[i], *stored, "run %d", i)
	}
}
