package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestAFireWakesThePollsItIsFor: a fire's task-ready notification names
// the agents its tasks are routed to. Their waiting polls lease at once,
// without a check first; the other polls do not check then (with 200 agents waiting,
// every fire made 200 checks), but when the tasks may be stolen: a task
// whose agent does not come for it is leased by another after
// StealAfter, though no notification names that one and its poll would
// otherwise sleep for a minute (IdleRecheck).
func TestAFireWakesThePollsItIsFor(t *testing.T) {
	const steal = 1500 * time.Millisecond
	e := setup(t, func(c *dispatch.AgentConfig) { c.StealAfter = steal })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notifier := notify.NewNotifier(e.pool, nil, notify.TaskReadyChannel, notify.JobChangedChannel, notify.ExecutionEndedChannel)
	require.NoError(t, notifier.Start(ctx))
	t.Cleanup(notifier.Stop)
	m := metrics.New(nil)
	statements := &dbtest.Statements{}
	traced := e.pool.Config().Copy()
	traced.ConnConfig.Tracer = statements
	pool, err := pgxpool.NewWithConfig(ctx, traced)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	broker := dispatch.NewLeaseBroker(pool, notifier, e.cfg, nil, m)
	checks := func() int { return int(counter(t, m.LeaseChecks)) }

	const n = 5
	agents := make([]*axtype.Agent, n)
	for i := range agents {
		agents[i] = e.agent(nil, nil)
	}
	job := e.job(nil)
	// Once a notification sent now arrives, so did those the job and the
	// agents made (they arrive in commit order): none wakes the polls.
	sentinel, stop := notifier.SubscribeKey(notify.ExecutionEndedChannel, "sentinel")
	e.eventually(func() bool {
		require.NoError(t, db.Notify(ctx, e.pool, notify.ExecutionEndedChannel, "sentinel"))
		select {
		case <-sentinel:
			return true
		case <-time.After(20 * time.Millisecond):
			return false
		}
	}, "the notifier to listen")
	stop()
	type lease struct {
		agent int
		tasks []*axtype.LeasedTask
		at    time.Time
	}
	leases := make(chan lease, n)
	var polls sync.WaitGroup
	for i, a := range agents {
		polls.Go(func() {
			tasks, err := broker.Lease(ctx, a, 1, 30*time.Second)
			if ctx.Err() == nil {
				assert.NoError(t, err)
			}
			leases <- lease{agent: i, tasks: tasks, at: time.Now()}
		})
	}
	defer polls.Wait()
	defer cancel()
	e.eventually(func() bool { return checks() >= n }, "every poll to check")
	time.Sleep(100 * time.Millisecond) // and to sleep
	require.Equal(t, n, checks(), "one check a waiting poll")

	// A run routed to agents[0]: its poll alone is woken.
	fired := e.fireRoutedTo(job.ID, agents[0].ID, 0)
	select {
	case l := <-leases:
		require.Equal(t, 0, l.agent, "the agent the run is routed to leases it")
		require.Len(t, l.tasks, 1)
		require.Less(t, l.at.Sub(fired), steal/2, "at once")
		require.Equal(t, n, checks(), "the routed poll leased without a check, the others did not check")
	case <-time.After(10 * time.Second):
		t.Fatal("the routed agent's waiting poll did not lease its task")
	}
	// The others look when the tasks may be stolen: they find nothing.
	e.eventually(func() bool { return checks() >= n+n-1 }, "the other polls to look later")
	require.GreaterOrEqual(t, time.Since(fired), steal-100*time.Millisecond, "not before the steal delay")

	// A run routed to agents[0] again, whose poll ended: another steals
	// it once it may.
	fired = e.fireRoutedTo(job.ID, agents[0].ID, 0)
	thief := 0
	select {
	case l := <-leases:
		thief = l.agent
		require.NotEqual(t, 0, l.agent)
		require.Len(t, l.tasks, 1)
		require.GreaterOrEqual(t, l.at.Sub(fired), steal-100*time.Millisecond, "stolen after the steal delay")
		require.Less(t, l.at.Sub(fired), steal+5*time.Second, "not after the idle recheck")
	case <-time.After(15 * time.Second):
		t.Fatal("no other agent stole the task its agent did not come for")
	}

	// A run made ahead of its tick, routed to an agent still waiting: its
	// poll checks, and leases when the tick comes, not before (nor tries
	// to: no lease statement before it).
	const ahead = time.Second
	waiting := 1
	if thief == 1 {
		waiting = 2
	}
	time.Sleep(300 * time.Millisecond) // the polls that lost the steal look again, and sleep
	before, picks := checks(), statements.Count("TaskLeasePick")
	fired = e.fireRoutedTo(job.ID, agents[waiting].ID, ahead)
	time.Sleep(ahead / 2)
	require.Equal(t, picks, statements.Count("TaskLeasePick"), "no lease before the tick")
	require.GreaterOrEqual(t, checks(), before+1, "its poll checked")
	select {
	case l := <-leases:
		require.Equal(t, waiting, l.agent)
		require.Len(t, l.tasks, 1)
		require.GreaterOrEqual(t, l.at.Sub(fired), ahead-100*time.Millisecond, "at its tick")
		require.Less(t, l.at.Sub(fired), steal, "not when the others look")

	case <-time.After(10 * time.Second):
		t.Fatal("the routed agent's waiting poll did not lease the run made ahead")
	}
}

// fireRoutedTo fires a run of job jobID for ahead from now (a fire made
// ahead of its tick) whose tasks are routed to agent agentID, and sends
// its task-ready notification as the trigger loop does (naming the
// agent). It returns when the fire committed, the instant the run's tick
// is ahead of: the database's now in the fire's transaction. (The time
// after the commit was that instant plus the commit's wait: 150 ms of it
// on a loaded CI run, and the lease at the tick came "850 ms" after.)
func (e *env) fireRoutedTo(jobID, agentID uuid.UUID, ahead time.Duration) time.Time {
	e.t.Helper()
	ctx := context.Background()
	route := func(_ context.Context, tasks []*axtype.NewTask) ([]axtype.TaskRoute, error) {
		routes := make([]axtype.TaskRoute, len(tasks))
		for i, t := range tasks {
			routes[i] = axtype.TaskRoute{TaskID: t.ID, Preferred: agentID}
		}
		return routes, nil
	}
	var fired time.Time
	require.NoError(e.t, db.WithTx(ctx, e.pool, func(tx pgx.Tx) error {
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		fired = now
		_, tasks, err := db.ExecutionInsertMany(ctx, tx, []*axtype.NewExecution{{ID: uuid.Must(uuid.NewV7()), JobID: jobID,
			Cause: axtype.CauseManual, ScheduledFor: now.Add(ahead)}}, 10*time.Second, dispatch.GeneratedShardParams, route)
		if err != nil {
			return err
		}
		var ready notify.Targets
		dispatch.ReadyFor(&ready, tasks, now)
		key := dispatch.ReadyKey(agentID)
		if ahead > 0 {
			key = dispatch.LaterKey(agentID)
		}
		require.Equal(e.t, key, ready.Payload(), "the notification names the agent")
		return db.Notify(ctx, tx, notify.TaskReadyChannel, ready.Payload())
	}))
	return fired
}

// TestReadyForNamesWhomTasksAreFor: routed and pinned tasks name their
// agent, for a lease at once or, for a task leasable later, a check; a
// task any agent may take at once, or one of a concurrency key (any lease
// may unpark it), is everyone's; agentless tasks and tasks written failed
// are no one's.
func TestReadyForNamesWhomTasksAreFor(t *testing.T) {
	a, b := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	now := time.Now()
	payload := func(tasks ...*axtype.NewTask) []string {
		var ready notify.Targets
		dispatch.ReadyFor(&ready, tasks, now)
		if ready.Payload() == "" {
			return nil
		}
		return strings.Split(ready.Payload(), ",")
	}
	require.ElementsMatch(t, []string{dispatch.ReadyKey(a), dispatch.LaterKey(b)},
		payload(&axtype.NewTask{Preferred: a, NotBefore: now}, &axtype.NewTask{Preferred: b, NotBefore: now.Add(time.Second)},
			&axtype.NewTask{Preferred: a, Pinned: true, NotBefore: now.Add(-time.Second)}, &axtype.NewTask{Agentless: true},
			&axtype.NewTask{ConcurrencyTemplate: "k", ConcurrencyError: "no key", Preferred: b}))
	require.Nil(t, payload(&axtype.NewTask{Preferred: a}, &axtype.NewTask{}), "an unrouted task: everyone")
	require.Nil(t, payload(&axtype.NewTask{Preferred: a, ConcurrencyTemplate: "k", ConcurrencyKey: "x"}),
		"a keyed task: everyone")
}
