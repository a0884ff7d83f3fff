package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// insertRun inserts a bare run of job jobID with e and returns its id.
func insertRun(ctx context.Context, e db.Executor, jobID uuid.UUID) (uuid.UUID, error) {
	id := uuid.Must(uuid.NewV7())
	_, err := e.Exec(ctx, `INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		VALUES ($1, $2, 'manual', now(), 1, 0)`,
		id, jobID)
	return id, err
}

// waitOnLock waits until the backend pid waits on a lock.
func waitOnLock(t *testing.T, pool *pgxpool.Pool, pid uint32, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting bool
		_ = pool.QueryRow(context.Background(),
			`SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $1`, pid).Scan(&waiting)
		return waiting
	}, 10*time.Second, 5*time.Millisecond, what)
}

// TestRunsHoldTheirJob: a run's job is checked once per statement
// (migration 00065) with the rule the foreign key held: a run of a job
// that does not exist is refused as a foreign-key violation of
// execution_job_id_fkey; a job's deletion waits for a transaction that
// fires it and then deletes the run that transaction committed; a fire
// that waited for a deletion is refused; a deletion takes the job's live
// runs and no other job's.
func TestRunsHoldTheirJob(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	t.Run("no such job", func(t *testing.T) {
		job := testfactory.Job(ctx, t, pool, nil)
		_, err := pool.Exec(ctx, `INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
			VALUES (ax.uuid_v7(), $1, 'manual', now(), 1, 0), (ax.uuid_v7(), $2, 'manual', now(), 1, 0)`, job.ID, uuid.New())
		var bad *axtype.ConstraintError
		require.ErrorAs(t, db.MapErrForTest(err), &bad)
		require.Equal(t, "execution_job_id_fkey", bad.Constraint)
		var runs int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ax.execution WHERE job_id = $1`, job.ID).Scan(&runs))
		require.Zero(t, runs, "the statement's other row is not written either")
	})

	t.Run("deletion waits for the fire", func(t *testing.T) {
		job := testfactory.Job(ctx, t, pool, nil)
		other := testfactory.Job(ctx, t, pool, nil)
		kept, err := insertRun(ctx, pool, other.ID)
		require.NoError(t, err)
		fire, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = fire.Rollback(ctx) }()
		run, err := insertRun(ctx, fire, job.ID)
		require.NoError(t, err)

		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		deleted := make(chan error, 1)
		go func() { deleted <- db.JobDelete(ctx, conn, job.ID) }()
		waitOnLock(t, pool, conn.Conn().PgConn().PID(), "the deletion waits for the fire's transaction")
		require.NoError(t, fire.Commit(ctx))
		require.NoError(t, <-deleted)

		var left, others int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ax.execution WHERE id = $1`, run).Scan(&left))
		require.Zero(t, left, "the run committed while the deletion waited went with its job")
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ax.execution WHERE id = $1`, kept).Scan(&others))
		require.Equal(t, 1, others, "another job's run stays")
	})

	// fireDuringDeletion deletes job in a transaction it returns, then
	// fires it on another connection and returns the fire's error once
	// the fire waits on the deletion's lock.
	fireDuringDeletion := func(t *testing.T, job uuid.UUID) (pgx.Tx, <-chan error) {
		del, err := pool.Begin(ctx)
		require.NoError(t, err)
		t.Cleanup(func() { _ = del.Rollback(ctx) })
		require.NoError(t, db.JobDelete(ctx, del, job))
		conn, err := pool.Acquire(ctx)
		require.NoError(t, err)
		fired := make(chan error, 1)
		go func() {
			_, err := insertRun(ctx, conn, job)
			conn.Release()
			fired <- err
		}()
		waitOnLock(t, pool, conn.Conn().PgConn().PID(), "the fire waits for the deletion's transaction")
		return del, fired
	}

	t.Run("fire waits for the deletion", func(t *testing.T) {
		del, fired := fireDuringDeletion(t, testfactory.Job(ctx, t, pool, nil).ID)
		require.NoError(t, del.Commit(ctx))
		var bad *axtype.ConstraintError
		require.ErrorAs(t, db.MapErrForTest(<-fired), &bad)
		require.Equal(t, "execution_job_id_fkey", bad.Constraint)
	})

	t.Run("fire of a job deleted and rolled back", func(t *testing.T) {
		del, fired := fireDuringDeletion(t, testfactory.Job(ctx, t, pool, nil).ID)
		require.NoError(t, del.Rollback(ctx))
		require.NoError(t, <-fired, "the job is still there")
	})
}
