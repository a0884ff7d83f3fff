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
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// Polls due at the same time are served by coalesced leases: 30 agents
// asking at once each get their task, every task once, in a few lease
// statements, not one transaction per agent.
func TestDuePollsShareOneLease(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	statements := &dbtest.Statements{}
	broker := e.brokerTracedBy(statements)

	const n = 30
	agents := e.agentsAndTasks(n)

	got := make([][]*axtype.LeasedTask, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() {
			<-start
			tasks, err := broker.Lease(ctx, a, 1, 0)
			require.NoError(t, err)
			got[i] = tasks
		})
	}
	close(start)
	wg.Wait()
	seen := map[uuid.UUID]bool{}
	for i, tasks := range got {
		require.Len(t, tasks, 1, "agent %d gets one task", i)
		require.False(t, seen[tasks[0].ID], "task %s leased twice", tasks[0].ID)
		seen[tasks[0].ID] = true
		require.Equal(t, agents[i].ID, e.agentOf(tasks[0].ID), "the task is leased to the agent it was handed to")
	}
	leases := statements.Count("TaskLeaseTake")
	require.LessOrEqual(t, leases, n/3, "lease statements for %d polls", n)
	t.Logf("%d polls served by %d lease statements", n, leases)
}

// Results that agents report at the same time are recorded together: 30
// agents' results in a few statements, each agent told what its own
// changed. An agent's results the database refuses (here a state it does
// not know) fail that agent's call only. A task two agents report in the
// same moment is recorded with the holder's result, never the other's.
func TestResultsReportedTogetherAreRecordedTogether(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	statements := &dbtest.Statements{}
	broker := e.brokerTracedBy(statements)

	const n = 30
	agents := e.agentsAndTasks(n)
	leased := make([]*axtype.LeasedTask, n)
	for i, a := range agents {
		tasks := e.lease(a, 1)
		require.Len(t, tasks, 1)
		leased[i] = tasks[0]
	}
	const refused = 27 // reports a state the database does not know
	const thief = 28   // also reports agent 29's task, with its token
	report := func(i int) []axtype.TaskResult {
		state := axtype.TaskSucceeded
		if i == refused {
			state = "bogus"
		}
		return []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: leased[i].ID, Token: leased[i].LeaseToken}, State: state}}
	}
	// All at once: the first 20 agents, then the last 10 with the refused
	// call and the thief among them.
	completeAll := func(from, to int) {
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := from; i < to; i++ {
			wg.Go(func() {
				<-start
				results := report(i)
				if i == thief {
					stolen := report(thief + 1)[0]
					stolen.State = axtype.TaskFailed
					results = append([]axtype.TaskResult{stolen}, results...)
				}
				done, err := broker.Complete(ctx, agents[i].ID, results)
				if i == refused {
					require.Error(t, err, "the refused results fail their own call")
					return
				}
				require.NoError(t, err)
				require.Len(t, done, 1, "agent %d is told of its own result only", i)
				require.Equal(t, leased[i].ID, done[0].ID)
				require.Equal(t, axtype.TaskSucceeded, done[0].State)
			})
		}
		close(start)
		wg.Wait()
	}
	completeAll(0, 20)
	completes := statements.Count("TaskComplete")
	require.LessOrEqual(t, completes, 5, "completion statements for 20 calls")
	t.Logf("20 calls recorded by %d completion statements", completes)
	completeAll(20, n)
	for i, lt := range leased {
		task := e.task(lt.ID)
		if i == refused {
			require.Equal(t, axtype.TaskLeased, task.State, "the refused result changed nothing")
			continue
		}
		require.Equal(t, axtype.TaskSucceeded, task.State, "task %d", i)
		require.Equal(t, agents[i].ID, e.agentOf(lt.ID))
	}
}

// A stream of runs that become leasable one at a time, taken by an agent
// with slots to spare that polls again as soon as it has its tasks, is
// leased at the broker's pace: each lease takes what came since the last,
// rather than one lease statement per run (dispatch.BatchPace).
func TestAStreamIsLeasedAtPace(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	a := e.agent(nil, nil) // 100 slots
	job := e.job(nil)
	const runs = 60

	type poll struct {
		tasks int
		err   error
	}
	polls := make(chan poll, runs)
	began := time.Now()
	go func() {
		for got := 0; got < runs; {
			tasks, err := e.broker.Lease(ctx, a, 100, 10*time.Second)
			polls <- poll{tasks: len(tasks), err: err}
			if err != nil || len(tasks) == 0 {
				return
			}
			got += len(tasks)
		}
		close(polls)
	}()
	for range runs {
		e.trigger(job.ID)
		time.Sleep(2 * time.Millisecond)
	}
	leases, got := 0, 0
	for p := range polls {
		require.NoError(t, p.err)
		require.Positive(t, p.tasks, "a poll of 10 s ended empty")
		leases++
		got += p.tasks
	}
	elapsed := time.Since(began)
	require.Equal(t, runs, got)
	require.LessOrEqual(t, leases, int(elapsed/dispatch.BatchPace)+3,
		"%d runs over %s in %d leases: at most one per pace", runs, elapsed, leases)
	t.Logf("%d runs over %s leased in %d leases", runs, elapsed, leases)
}

// Results reported one by one in a stream (each call a few ms after the
// last, none waiting for another) are recorded at the broker's pace: each
// completion statement takes the calls that came since the last, rather
// than one statement per call or two.
func TestAStreamOfResultsIsRecordedAtPace(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	statements := &dbtest.Statements{}
	broker := e.brokerTracedBy(statements)
	a := e.agent(nil, nil)
	const results = 40
	e.trigger(e.job(func(j *axtype.Job) { j.ShardCount = results }).ID)
	leased := e.lease(a, results)
	require.Len(t, leased, results)

	errs := make(chan error, results)
	began := time.Now()
	for _, lt := range leased {
		go func() {
			_, err := broker.Complete(ctx, a.ID, []axtype.TaskResult{
				{TaskRef: axtype.TaskRef{ID: lt.ID, Token: lt.LeaseToken}, State: axtype.TaskSucceeded}})
			errs <- err
		}()
		time.Sleep(2 * time.Millisecond)
	}
	for range results {
		require.NoError(t, <-errs)
	}
	elapsed := time.Since(began)
	completes := statements.Count("TaskComplete")
	require.LessOrEqual(t, completes, int(elapsed/dispatch.BatchPace)+3,
		"%d calls over %s in %d completions: at most one per pace", results, elapsed, completes)
	t.Logf("%d calls over %s recorded by %d completion statements", results, elapsed, completes)
}
