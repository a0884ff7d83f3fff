package queue_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

func TestTriggerWithAnIdempotencyKey(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(nil)
	key := e.apiKey()
	req := func(mutate func(r *queue.TriggerRequest)) *queue.TriggerRequest {
		r := &queue.TriggerRequest{JobID: job.ID, APIKeyID: key, IdempotencyKey: "k-1", Method: "POST",
			Path: "/v1/jobs/" + job.ID.String() + "/trigger", RequestHash: []byte("hash-1")}
		if mutate != nil {
			mutate(r)
		}
		return r
	}

	first, replayed, err := e.execs.Trigger(ctx, req(nil))
	require.NoError(t, err)
	require.False(t, replayed)
	again, replayed, err := e.execs.Trigger(ctx, req(nil))
	require.NoError(t, err)
	require.True(t, replayed)
	require.Equal(t, first.ID, again.ID, "the same key and request return the same execution")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, job.ID))

	for _, other := range []func(r *queue.TriggerRequest){
		func(r *queue.TriggerRequest) { r.RequestHash = []byte("hash-2") },
		func(r *queue.TriggerRequest) { r.Path = "/v1/runs" },
		func(r *queue.TriggerRequest) { r.Method = "PUT" },
	} {
		_, _, err := e.execs.Trigger(ctx, req(other))
		require.ErrorIs(t, err, queue.ErrIdempotencyMismatch)
	}
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, job.ID), "a mismatch fires nothing")

	// Keys belong to their API key.
	theirs, replayed, err := e.execs.Trigger(ctx, req(func(r *queue.TriggerRequest) { r.APIKeyID = e.apiKey() }))
	require.NoError(t, err)
	require.False(t, replayed)
	require.NotEqual(t, first.ID, theirs.ID)
}

func TestTriggerWithAnIdempotencyKeyConcurrently(t *testing.T) {
	e := setup(t)
	job := e.job(nil)
	key := e.apiKey()
	const callers = 6
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		execs    = map[uuid.UUID]bool{}
		replayed int
		start    = make(chan struct{})
	)
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			exec, again, err := e.execs.Trigger(context.Background(), &queue.TriggerRequest{JobID: job.ID, APIKeyID: key,
				IdempotencyKey: "same", Method: "POST", Path: "/p", RequestHash: []byte("h")})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			execs[exec.ID] = true
			if again {
				replayed++
			}
		}()
	}
	close(start)
	wg.Wait()
	require.Len(t, execs, 1, "every caller got the one execution")
	require.Equal(t, callers-1, replayed)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, job.ID))
}

func TestTriggerHonoursTheConcurrencyPolicy(t *testing.T) {
	e := setup(t)
	ctx := context.Background()

	forbid := e.job(func(j *axtype.Job) { j.ConcurrencyPolicy = "forbid" })
	first := e.trigger(forbid.ID)
	_, _, err := e.execs.Trigger(ctx, &queue.TriggerRequest{JobID: forbid.ID})
	require.ErrorIs(t, err, queue.ErrOverlapForbidden)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, forbid.ID))
	_, err = e.execs.Cancel(ctx, first.ID, "make room")
	require.NoError(t, err)
	e.trigger(forbid.ID)

	replace := e.job(func(j *axtype.Job) { j.ConcurrencyPolicy = "replace" })
	old := e.trigger(replace.ID)
	newer := e.trigger(replace.ID)
	require.Equal(t, axtype.ExecutionState("cancelled"), e.execution(old.ID).State, "the newer fire replaces the unfinished one")
	require.Equal(t, "replaced by a newer fire", e.execution(old.ID).CancelReason)
	require.Equal(t, axtype.ExecutionState("pending"), e.execution(newer.ID).State)

	allow := e.job(nil)
	a, b := e.trigger(allow.ID), e.trigger(allow.ID)
	require.Equal(t, axtype.ExecutionState("pending"), e.execution(a.ID).State)
	require.Equal(t, axtype.ExecutionState("pending"), e.execution(b.ID).State)
}

// TestTriggerQueuesBehindTheUnfinishedRun: a manual trigger of a queue
// job while a run is unfinished waits behind it (its task held); a second
// one is refused while one waits; ending the first releases the waiting
// one in that transaction.
func TestTriggerQueuesBehindTheUnfinishedRun(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.ConcurrencyPolicy = axtype.ConcurrencyQueue })
	first := e.trigger(job.ID)
	waiting := e.trigger(job.ID)
	require.Equal(t, axtype.ExecutionPending, e.execution(waiting.ID).State)
	wait, err := db.QueuedRunGet(ctx, e.pool, waiting.ID)
	require.NoError(t, err)
	require.Equal(t, first.ID, wait.BehindID)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.task WHERE execution_id = $1 AND not_before = $2`, waiting.ID, axtype.QueuedHold))

	_, _, err = e.execs.Trigger(ctx, &queue.TriggerRequest{JobID: job.ID})
	require.ErrorIs(t, err, queue.ErrOverlapQueueFull)
	require.Equal(t, 2, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, job.ID), "a refused trigger leaves nothing")

	_, err = e.execs.Cancel(ctx, first.ID, "make room")
	require.NoError(t, err)
	wait, err = db.QueuedRunGet(ctx, e.pool, waiting.ID)
	require.NoError(t, err)
	require.NotNil(t, wait.ReleasedAt, "released by the cancel's transaction")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.task WHERE execution_id = $1 AND not_before <= now()`, waiting.ID))
	x, err := e.execs.Explain(ctx, job.ID, waiting.ScheduledFor, false)
	require.NoError(t, err)
	require.Contains(t, x.Reason, "waited behind run "+first.ID.String())
}

func TestCancelEndsPendingTasksAndFlagsRunningOnes(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	exec := e.trigger(e.job(func(j *axtype.Job) { j.ShardCount = 2 }).ID)
	a := e.agent()
	leased, err := e.broker.Lease(ctx, a, 1, 0)
	require.NoError(t, err)
	require.Len(t, leased, 1)
	ref := axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}

	cancelled, err := e.execs.Cancel(ctx, exec.ID, "not needed")
	require.NoError(t, err)
	require.Equal(t, axtype.ExecutionState("running"), cancelled.State, "it ends when its running task stops")
	require.NotNil(t, cancelled.CancelRequestedAt)
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_tasks WHERE execution_id = $1 AND state = 'cancelled'`, exec.ID),
		"the pending task ends at once")
	hb, err := e.broker.Heartbeat(ctx, a.ID, []axtype.TaskRef{ref}, &axtype.AgentLoad{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{ref.ID}, hb.Cancel, "the agent is told to stop the running one")

	_, err = e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: ref, State: "cancelled"}})
	require.NoError(t, err)
	ended := e.execution(exec.ID)
	require.Equal(t, axtype.ExecutionState("cancelled"), ended.State)
	require.Equal(t, "not needed", ended.CancelReason)

	// Cancelling a finished execution changes nothing.
	done := e.trigger(e.job(nil).ID)
	leased, err = e.broker.Lease(ctx, a, 1, 0)
	require.NoError(t, err)
	require.Len(t, leased, 1)
	_, err = e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}, State: "succeeded"}})
	require.NoError(t, err)
	after, err := e.execs.Cancel(ctx, done.ID, "too late")
	require.NoError(t, err)
	require.Equal(t, axtype.ExecutionState("succeeded"), after.State)
	require.Nil(t, after.CancelRequestedAt)
}

// TestFiresOfOneJobWaitWithoutAConnection: while a job's rows are locked
// (here by another session; in production by the fire of it before),
// further fires of the job wait for their turn without holding a
// connection of the replica's pool, so the rest of the replica still gets
// connections. A fire whose caller leaves stops waiting and makes
// nothing; once the lock goes, every other fire is made.
func TestFiresOfOneJobWaitWithoutAConnection(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(nil)
	small, err := db.OpenPool(ctx, e.pool.Config().ConnString(), db.PoolSize{MaxConns: 3})
	require.NoError(t, err)
	t.Cleanup(small.Close)
	execs := queue.NewExecutionService(small, nil, nil)

	holder, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = holder.Rollback(ctx) }()
	_, err = holder.Exec(ctx, `SELECT 1 FROM ax.job WHERE id = $1 FOR UPDATE`, job.ID)
	require.NoError(t, err)

	const fires = 6
	errs := make(chan error, fires)
	for range fires {
		go func() {
			_, _, err := execs.Trigger(ctx, &queue.TriggerRequest{JobID: job.ID})
			errs <- err
		}()
	}
	waiting := func() int {
		return e.count(`SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`)
	}
	require.Eventually(t, func() bool { return waiting() >= 1 }, 10*time.Second, 10*time.Millisecond,
		"a fire waits for the job's lock")
	require.Never(t, func() bool { return waiting() > 1 }, 300*time.Millisecond, 10*time.Millisecond,
		"the other fires wait for their turn outside the database")
	acquireCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for range 2 {
		conn, err := small.Acquire(acquireCtx)
		require.NoError(t, err, "the pool's other connections are free")
		defer conn.Release()
	}

	leaving, cancelLeaving := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancelLeaving()
	_, _, err = execs.Trigger(leaving, &queue.TriggerRequest{JobID: job.ID})
	require.ErrorIs(t, err, context.DeadlineExceeded, "a caller that leaves stops waiting")

	require.NoError(t, holder.Rollback(ctx))
	for range fires {
		select {
		case err := <-errs:
			require.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Fatal("a fire did not return once the lock went")
		}
	}
	require.Equal(t, fires, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, job.ID))
}
