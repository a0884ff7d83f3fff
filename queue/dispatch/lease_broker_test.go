package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

func TestLeaseHandsEachTaskOnce(t *testing.T) {
	e := setup(t, nil)
	const shards = 40
	e.trigger(e.job(func(j *axtype.Job) { j.ShardCount = shards }).ID)
	agents := []*axtype.Agent{e.agent(nil, nil), e.agent(nil, nil), e.agent(nil, nil)}

	// Two polls per agent at once, each leasing a few tasks at a time
	// until none is left for it.
	var (
		mu     sync.Mutex
		holder = map[uuid.UUID][]uuid.UUID{} // task → agents it was leased to
		start  = make(chan struct{})
		wg     sync.WaitGroup
	)
	for _, a := range agents {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for {
					tasks, err := e.broker.Lease(context.Background(), a, 3, 0)
					if err != nil {
						t.Error(err)
						return
					}
					if len(tasks) == 0 {
						return
					}
					mu.Lock()
					for _, task := range tasks {
						holder[task.ID] = append(holder[task.ID], a.ID)
					}
					mu.Unlock()
				}
			}()
		}
	}
	close(start)
	wg.Wait()

	require.Len(t, holder, shards, "every task was leased")
	for id, got := range holder {
		require.Len(t, got, 1, "task %s was leased more than once", id)
		require.Equal(t, got[0], e.agentOf(id), "the database names the agent that got it")
	}
	require.Empty(t, e.lease(agents[0], 10), "nothing is left to lease")
}

func TestCompleteIsFencedByTokenAndHolder(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	exec := e.trigger(e.job(nil).ID)
	a, b := e.agent(nil, nil), e.agent(nil, nil)
	leased := e.lease(a, 1)
	require.Len(t, leased, 1)
	task, token := leased[0].ID, leased[0].LeaseToken

	done, err := e.broker.Complete(ctx, b.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task, Token: token}, State: "succeeded"}})
	require.NoError(t, err)
	require.Empty(t, done, "another agent's result counts for nothing, even with the current token")
	done, err = e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task, Token: uuid.New()}, State: "succeeded"}})
	require.NoError(t, err)
	require.Empty(t, done, "a result with a wrong token counts for nothing")
	require.Equal(t, axtype.TaskState("leased"), e.task(task).State)

	hb, err := e.broker.Heartbeat(ctx, b.ID, []axtype.TaskRef{{ID: task, Token: token}}, &axtype.AgentLoad{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{task}, hb.Lost, "a heartbeat renews only leases the agent holds")
	hb, err = e.broker.Heartbeat(ctx, a.ID, []axtype.TaskRef{{ID: task, Token: token}}, &axtype.AgentLoad{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{task}, hb.Renewed)
	require.Equal(t, axtype.TaskState("running"), e.task(task).State)

	// A hands the task back; B gets it with a new token.
	released, err := e.broker.Release(ctx, a.ID, []axtype.TaskRef{{ID: task, Token: token}})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{task}, released)
	require.Equal(t, 1, e.task(task).Attempt, "a release uses up no attempt")
	again := e.lease(b, 1)
	require.Len(t, again, 1)
	require.Equal(t, task, again[0].ID)
	newToken := again[0].LeaseToken
	require.NotEqual(t, token, newToken)

	for _, stale := range []struct {
		agent uuid.UUID
		token uuid.UUID
		why   string
	}{
		{a.ID, token, "the former holder with its old token"},
		{a.ID, newToken, "the former holder with the current token"},
		{b.ID, token, "the holder with the old token"},
	} {
		done, err := e.broker.Complete(ctx, stale.agent, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task, Token: stale.token}, State: "failed"}})
		require.NoError(t, err)
		require.Empty(t, done, stale.why)
	}
	require.Equal(t, axtype.TaskState("leased"), e.task(task).State)
	require.Equal(t, b.ID, e.agentOf(task))
	require.Equal(t, axtype.ExecutionState("running"), e.execution(exec.ID).State)

	done, err = e.broker.Complete(ctx, b.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task, Token: newToken}, State: "succeeded"}})
	require.NoError(t, err)
	require.Equal(t, []axtype.CompletedTask{{ID: task, ExecutionID: exec.ID, State: "succeeded", Finalized: true}}, done)
	require.Equal(t, axtype.ExecutionState("succeeded"), e.execution(exec.ID).State)
	done, err = e.broker.Complete(ctx, b.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task, Token: newToken}, State: "failed"}})
	require.NoError(t, err)
	require.Empty(t, done, "a result counts once")
	require.Equal(t, axtype.TaskState("succeeded"), e.task(task).State)
}

// TestLeaseGivesADrainedAgentNothing: an operator's drain stops leasing
// at once, even for an agent whose poll began before it, and holds across
// registering again until Resume.
func TestLeaseGivesADrainedAgentNothing(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	exec := e.trigger(e.job(nil).ID)
	a := e.agent(nil, func(a *axtype.Agent) { a.RegisteredBy = &e.keyID })
	require.NoError(t, e.broker.DrainHold(ctx, a.ID))

	require.Empty(t, e.lease(a, 10), "a lease that read the agent before the drain gets nothing")
	drained, err := e.broker.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.AgentState("draining"), drained.State)
	_, err = e.broker.Lease(ctx, drained, 10, time.Minute)
	require.ErrorIs(t, err, dispatch.ErrAgentNotActive)

	// Registering again under the same identity does not lift the drain.
	require.NoError(t, e.broker.SetState(ctx, a.ID, "offline"))
	again := e.agent(nil, func(r *axtype.Agent) { r.Name = a.Name; r.RegisteredBy = &e.keyID })
	require.Equal(t, axtype.AgentState("draining"), again.State)
	_, err = e.broker.Lease(ctx, again, 10, 0)
	require.ErrorIs(t, err, dispatch.ErrAgentNotActive)
	require.Equal(t, axtype.ExecutionState("pending"), e.execution(exec.ID).State)

	require.NoError(t, e.broker.Resume(ctx, again.ID))
	resumed, err := e.broker.Get(ctx, again.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.AgentState("active"), resumed.State)
	require.Len(t, e.lease(resumed, 10), 1)
}

// TestLongPollEndsWhenTheAgentIsDrained: a poll waiting for work returns
// empty-handed once its agent is drained, and leaves new work to others.
func TestLongPollEndsWhenTheAgentIsDrained(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	job := e.job(nil)
	a := e.agent(nil, nil)
	got := make(chan []*axtype.LeasedTask, 1)
	go func() {
		tasks, err := e.broker.Lease(ctx, a, 10, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- tasks
	}()
	e.pollWaiting()
	require.NoError(t, e.broker.DrainHold(ctx, a.ID))
	exec := e.trigger(job.ID) // wakes the poll

	select {
	case tasks := <-got:
		require.Empty(t, tasks)
	case <-time.After(10 * time.Second):
		t.Fatal("the poll of a drained agent went on waiting")
	}
	require.Equal(t, axtype.ExecutionState("pending"), e.execution(exec.ID).State)
}

// TestLongPollWakesWhenATaskIsReady: a waiting poll is woken by the
// trigger's NOTIFY, not by its fallback recheck (a minute here) or its
// timeout (30 s).
func TestLongPollWakesWhenATaskIsReady(t *testing.T) {
	e := setup(t, nil)
	job := e.job(nil)
	a := e.agent(nil, nil)
	got := make(chan []*axtype.LeasedTask, 1)
	go func() {
		tasks, err := e.broker.Lease(context.Background(), a, 10, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- tasks
	}()
	e.pollWaiting()
	exec := e.trigger(job.ID)

	select {
	case tasks := <-got:
		require.Len(t, tasks, 1)
		require.Equal(t, exec.ID, tasks[0].ExecutionID)
	case <-time.After(10 * time.Second):
		t.Fatal("the poll was not woken by the new task")
	}
}

// TestResultsOfABatchThatTimedOutAreRecordedOneByOne: two agents' results
// in one batch, one of which makes the statement slower than the batch's
// time (a task whose move to history sleeps 2 s; the batch's context
// ends at 1 s). Each call is then recorded alone, in a time of its own:
// both are recorded. The calls were retried in the batch's expired
// context before, and both failed at once.
func TestResultsOfABatchThatTimedOutAreRecordedOneByOne(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	slowAgent, quickAgent := e.agent(nil, nil), e.agent(nil, nil)
	var results [][]axtype.TaskResult
	for _, a := range []*axtype.Agent{slowAgent, quickAgent} {
		e.trigger(e.job(nil).ID)
		leased := e.lease(a, 1)
		require.Len(t, leased, 1)
		results = append(results, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken},
			State: axtype.TaskSucceeded}})
	}
	_, err := e.pool.Exec(ctx, `
		CREATE FUNCTION public.slow_history() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.id = '`+results[0][0].ID.String()+`' THEN
				PERFORM pg_sleep(2);
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER slow BEFORE INSERT ON ax.task_history FOR EACH ROW EXECUTE FUNCTION public.slow_history()`)
	require.NoError(t, err)

	batchCtx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	done, errs := e.broker.ServeResults(batchCtx, []uuid.UUID{slowAgent.ID, quickAgent.ID}, results)
	for _, i := range []int{1, 0} { // the quick agent's first: the other agent's slow result cost it its own
		require.NoError(t, errs[i], "call %d", i)
		require.Len(t, done[i], 1, "call %d", i)
		require.Equal(t, axtype.TaskSucceeded, e.task(results[i][0].ID).State)
	}
}
