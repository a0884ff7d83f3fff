package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// A lease locks the tasks it picked, then starts their run; a cancel
// locked the run, then its tasks. Met on one pending run they deadlocked:
// Postgres broke it after deadlock_timeout (1 s) by failing one, and a
// failed lease is the whole batch of every agent a replica serves at once.
// A cancel now locks a run's pending tasks before the run. The first two
// tests below hold a pending run's row, queue a cancel behind it, then
// lease: neither may fail, and the cancel wins.

// TestAgentLeaseSkipsTheTasksOfARunBeingCancelled: the agents' lease skips
// the pending tasks a waiting cancel holds, rather than taking them and
// then waiting for their run.
func TestAgentLeaseSkipsTheTasksOfARunBeingCancelled(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	agent, run, task := pendingRun(t, pool, false)
	cancel := holdRunThenCancel(t, pool, run)

	leased := make(chan error, 1)
	var got [][]*axtype.LeasedTask
	go func() {
		var err error
		got, err = dispatch.LeaseMany(ctx, pool, &dispatch.LeaseBatch{
			Agents: []axtype.LeaseAgent{{ID: agent, Executors: []string{"http"}, Max: 5}},
			Lease:  30 * time.Second, StealAfter: time.Minute, StarveAfter: time.Hour})
		leased <- err
	}()
	select {
	case err := <-leased:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the lease waits for the run being cancelled")
	}
	require.Len(t, got, 1)
	require.Empty(t, got[0], "the task the cancel holds is skipped")

	require.NoError(t, cancel.finish(), "the cancel")
	requireStates(t, pool, run, task, "cancelled", "cancelled")
}

// TestAgentlessLeaseWaitsForACancelOfItsRun: ax serve's lease of an
// agentless HTTP task waits for the task a cancel holds, and then finds it
// cancelled.
func TestAgentlessLeaseWaitsForACancelOfItsRun(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	_, run, task := pendingRun(t, pool, true)
	cancel := holdRunThenCancel(t, pool, run)

	leaser, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = leaser.Rollback(ctx) })
	var leaserPID int32
	require.NoError(t, leaser.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&leaserPID))
	leased := make(chan error, 1)
	go func() {
		_, err := db.TaskLeaseAgentless(ctx, leaser, task, 1, time.Second)
		leased <- err
	}()
	waitForLock(t, pool, leaserPID, "the agentless lease")

	require.NoError(t, cancel.finish(), "the cancel")
	require.ErrorIs(t, <-leased, axtype.ErrNotFound, "the cancelled task is not leased")
	require.NoError(t, leaser.Commit(ctx))
	requireStates(t, pool, run, task, "cancelled", "cancelled")
}

// TestCancelFlagsATaskLeasedWhileItWaited: a cancel of a running run that
// waits for one of its tasks while a lease takes it flags that task for
// its agent. The cancel's statement saw it pending: it read the tasks'
// states as of its start and so neither cancelled nor flagged it, and the
// task ran on.
func TestCancelFlagsATaskLeasedWhileItWaited(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	agent, run, task := pendingRun(t, pool, false)
	_, err := pool.Exec(ctx, "UPDATE ax.execution SET state = 'running', started_at = now() WHERE id = $1", run)
	require.NoError(t, err)

	lease, err := pool.Begin(ctx) // what a lease does, held open
	require.NoError(t, err)
	t.Cleanup(func() { _ = lease.Rollback(ctx) })
	_, err = lease.Exec(ctx, "SELECT 1 FROM ax.task WHERE id = $1 FOR UPDATE", task)
	require.NoError(t, err)
	cancel := startCancel(t, pool, run)
	_, err = lease.Exec(ctx, `UPDATE ax.task SET state = 'leased', agent_id = $2, lease_token = gen_random_uuid(),
		leased_at = now(), lease_expires_at = now() + interval '1 minute' WHERE id = $1`, task, agent)
	require.NoError(t, err)
	require.NoError(t, lease.Commit(ctx))

	require.NoError(t, cancel.finish(), "the cancel")
	var flagged bool
	require.NoError(t, pool.QueryRow(ctx, "SELECT cancel_requested_at IS NOT NULL FROM ax.task WHERE id = $1", task).
		Scan(&flagged))
	require.True(t, flagged, "the task leased while the cancel waited is flagged for its agent")
	requireStates(t, pool, run, task, "running", "leased")
}

// pendingRun inserts an active agent and a pending run of an HTTP job
// with one due task (agentless or not).
func pendingRun(t *testing.T, pool *pgxpool.Pool, agentless bool) (agent, run, task uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	agent, jobID := httpAgentAndJob(t, pool, "pending", agentless)
	require.NoError(t, pool.QueryRow(ctx, `
		WITH e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		    VALUES (gen_random_uuid(), $1, 'manual', now(), 1, 0) RETURNING id, job_id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     not_before, agentless)
		SELECT id, job_id, 0, 1, 0, 1, 60, now() - interval '1 second', $2 FROM e
		RETURNING execution_id, id`, jobID, agentless).Scan(&run, &task))
	return agent, run, task
}

// cancelInFlight is an ExecutionCancel running in a transaction of its own.
type cancelInFlight struct {
	done   chan struct{}
	err    error
	tx     pgx.Tx
	finish func() error // waits for the statement, then commits
}

// holdRunThenCancel locks run's row in one transaction, starts a cancel
// of it that waits behind that lock, and returns the cancel; the lock is
// let go when the cancel's finish is called.
func holdRunThenCancel(t *testing.T, pool *pgxpool.Pool, run uuid.UUID) *cancelInFlight {
	t.Helper()
	ctx := context.Background()
	holder, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Rollback(ctx) })
	_, err = holder.Exec(ctx, "SELECT 1 FROM ax.execution WHERE id = $1 FOR UPDATE", run)
	require.NoError(t, err)
	c := startCancel(t, pool, run)
	wait := c.finish
	c.finish = func() error {
		if err := holder.Rollback(ctx); err != nil {
			return err
		}
		return wait()
	}
	return c
}

// startCancel starts ExecutionCancel of run in a transaction of its own
// and returns once the statement waits for a lock.
func startCancel(t *testing.T, pool *pgxpool.Pool, run uuid.UUID) *cancelInFlight {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	var pid int32
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid))
	c := &cancelInFlight{done: make(chan struct{}), tx: tx}
	go func() {
		defer close(c.done)
		_, c.err = db.ExecutionCancel(ctx, tx, []uuid.UUID{run}, nil, "test")
	}()
	t.Cleanup(func() { // also when a check fails: let the statement end, then end it
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
		}
		_ = tx.Rollback(ctx)
	})
	waitForLock(t, pool, pid, "the cancel")
	c.finish = func() error {
		select {
		case <-c.done:
		case <-time.After(10 * time.Second):
			return errors.New("the cancel did not end within 10 s")
		}
		if c.err != nil {
			return c.err
		}
		return tx.Commit(ctx)
	}
	return c
}

// waitForLock waits until the backend pid waits for a lock.
func waitForLock(t *testing.T, pool *pgxpool.Pool, pid int32, who string) {
	t.Helper()
	require.Eventually(t, func() bool {
		var waiting bool
		err := pool.QueryRow(context.Background(),
			"SELECT EXISTS (SELECT 1 FROM pg_locks WHERE pid = $1 AND NOT granted)", pid).Scan(&waiting)
		return err == nil && waiting
	}, 10*time.Second, 5*time.Millisecond, "%s waits for a lock", who)
}

// requireStates checks the states of run and its task.
func requireStates(t *testing.T, pool *pgxpool.Pool, run, task uuid.UUID, runState, taskState string) {
	t.Helper()
	var gotRun, gotTask string
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT (SELECT state::text FROM ax.all_executions WHERE id = $1),
		       (SELECT state::text FROM ax.all_tasks WHERE id = $2)`, run, task).Scan(&gotRun, &gotTask))
	require.Equal(t, runState, gotRun, "the run")
	require.Equal(t, taskState, gotTask, "the task")
}
