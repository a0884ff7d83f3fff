package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestRateClassGroupsHoldAcrossTransactions: a job naming a class and a
// change of the class's groups, written at once, never both commit when
// the job's group is left out (migration 00080): a change while the job's
// transaction is open is refused at once (busy, 00083), then by the job;
// a job written while the change's is open waits for it and is refused.
// Token takes do not wait for a job's transaction.
func TestRateClassGroupsHoldAcrossTransactions(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	_, err := db.RateClassInsert(ctx, pool, &axtype.RateClass{Name: "shared", Rate: 10, Burst: 10})
	require.NoError(t, err)
	// A ready task of the class, so that a take locks the class's row.
	_, err = pool.Exec(ctx, `
		WITH j AS (
		    INSERT INTO ax.job (name, group_name, trigger_kind, executor_kind, executor, agentless, rate_limit_class)
		    VALUES ('holder', 'billing', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false, 'shared')
		    RETURNING id
		), e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		    SELECT gen_random_uuid(), id, 'manual', now(), 1, 0 FROM j
		    RETURNING job_id, id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     not_before, rate_class)
		SELECT id, job_id, 0, 1, 0, 1, 60, now(), 'shared' FROM e`)
	require.NoError(t, err)
	insertJob := func(tx pgx.Tx, name string) error {
		_, err := tx.Exec(ctx, `INSERT INTO ax.job (name, group_name, trigger_kind, executor_kind, executor, agentless, rate_limit_class)
			VALUES ($1, 'payments', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false, 'shared')`, name)
		return err
	}
	keepTo := func(groups ...string) error {
		c := &axtype.RateClass{Name: "shared", Rate: 10, Burst: 10, Groups: groups}
		_, err := db.RateClassUpdate(ctx, pool, c)
		return err
	}
	refusedBy := func(err error, constraint string) {
		t.Helper()
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr), "%v", err)
		require.Equal(t, constraint, pgErr.ConstraintName)
	}

	// The job first: the change waits for it, then sees it.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	require.NoError(t, insertJob(tx, "first"))
	took, err := db.RateClassTake(ctx, pool, 1)
	require.NoError(t, err, "a token take does not wait for the job's transaction")
	require.Equal(t, 1, took["shared"])
	// The change does not queue behind the job (the leases' token takes
	// would queue behind it): busy, try again (migration 00083).
	require.ErrorIs(t, keepTo("billing"), axtype.ErrBusy)
	require.NoError(t, tx.Commit(ctx))
	var ce *axtype.ConstraintError
	err = keepTo("billing")
	require.True(t, errors.As(err, &ce), "%v", err)
	require.Equal(t, "rate_class_groups_in_use", ce.Constraint)

	// The change first: the job waits for it, then reads the new groups.
	_, err = pool.Exec(ctx, `DELETE FROM ax.job WHERE group_name = 'payments'`)
	require.NoError(t, err)
	change, err := pool.Begin(ctx)
	require.NoError(t, err)
	_, err = db.RateClassUpdate(ctx, change, &axtype.RateClass{Name: "shared", Rate: 10, Burst: 10, Groups: []string{"billing"}})
	require.NoError(t, err)
	written := make(chan error, 1)
	go func() {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return insertJob(tx, "second") })
		written <- err
	}()
	select {
	case err := <-written:
		t.Fatalf("the job did not wait for the change: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, change.Commit(ctx))
	refusedBy(<-written, "job_rate_class_groups")
	var jobs int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ax.job WHERE group_name = 'payments'`).Scan(&jobs))
	require.Zero(t, jobs)
	require.NoError(t, keepTo("billing", "payments"))
}
