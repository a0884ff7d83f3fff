package dispatch_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// seenEvent is what a reader of a run's events learns from one: the page
// reader behind the API's events (and so `ax exec logs -states` and the
// console), and the view ax.all_task_events an operator reads with psql.
type seenEvent struct {
	Kind, State, Agent, Host, Stream, Message string
	Attempt                                   int
}

// A task's lease and success are columns of its row (migration 00067);
// its other transitions are event rows, and a lease its row gives up for
// the next is written down as one. The readers show every fact the event
// rows showed before, in the same order, whatever the mix: here a failed
// attempt retried, a lease lost with its agent and run again, a success
// with logs between its lease and its result, and a run cancelled while
// leased, and a run its agent hands back. Only the last attempt's lease
// and its success are not rows of ax.task_event.
func TestEventsShowEveryTransitionOfARun(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	names := map[uuid.UUID]string{}
	agentOn := func(name, host, ip string) *axtype.Agent { return eventsAgent(t, e, names, name, host, ip, nil) }
	seen := func(run uuid.UUID) (page, view []seenEvent, ids []int64) { return seenEvents(t, e, names, run) }
	rowsOf := func(run uuid.UUID) (n int) {
		require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM ax.task_event WHERE execution_id = $1", run).Scan(&n))
		return n
	}
	complete := func(a *axtype.Agent, l *axtype.LeasedTask, state axtype.TaskState, msg string) {
		_, err := e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: l.ID, Token: l.LeaseToken},
			State: state, Error: msg}})
		require.NoError(t, err)
	}
	logLine := func(a *axtype.Agent, l *axtype.LeasedTask, line string) {
		_, err := e.broker.Logs(ctx, a.ID, []axtype.LogChunk{{TaskRef: axtype.TaskRef{ID: l.ID, Token: l.LeaseToken},
			Stream: "stdout", Data: line}})
		require.NoError(t, err)
	}

	alpha := agentOn("alpha", "host-a", "192.0.2.1")
	beta := agentOn("beta", "host-b", "192.0.2.2")
	task := e.trigger(3, time.Minute)

	// Attempt 1 fails on alpha and is retried.
	first := e.lease(alpha)
	require.Len(t, first, 1)
	logLine(alpha, first[0], "one\n")
	complete(alpha, first[0], axtype.TaskFailed, "boom")
	var retryAt time.Time
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT not_before FROM ax.task WHERE id = $1", task.ID).Scan(&retryAt))

	// Attempt 2 goes to beta, which falls silent: the lease is lost and
	// the attempt runs again at once.
	e.clock.Advance(time.Minute + time.Second)
	e.heartbeat(alpha)
	second := e.lease(beta)
	require.Len(t, second, 1)
	require.Equal(t, 2, second[0].Attempt)
	e.clock.Advance(e.cfg.Lease + time.Second)
	e.heartbeat(alpha)
	e.sweep()

	// Attempt 2 again, on alpha: output, then success.
	third := e.lease(alpha)
	require.Len(t, third, 1)
	require.Equal(t, 2, third[0].Attempt)
	logLine(alpha, third[0], "two\n")
	complete(alpha, third[0], axtype.TaskSucceeded, "")

	page, view, ids := seen(task.ExecutionID)
	want := []seenEvent{
		{Kind: "state", State: "leased", Agent: "alpha", Host: "host-a", Message: "unassigned", Attempt: 1},
		{Kind: "log", Agent: "alpha", Stream: "stdout", Message: "one\n", Attempt: 1},
		{Kind: "state", State: "failed", Agent: "alpha", Host: "host-a", Message: "boom", Attempt: 1},
		{Kind: "state", State: "pending", Agent: "alpha", Attempt: 2,
			Message: "retry after backoff, not before " + retryAt.UTC().Format("2006-01-02T15:04:05Z")},
		{Kind: "state", State: "leased", Agent: "beta", Host: "host-b", Message: "unassigned", Attempt: 2},
		{Kind: "state", State: "pending", Agent: "beta", Host: "host-b", Attempt: 2,
			Message: "lease lost: agent offline or silent: runs again at once on the same attempt (lost leases: 1 of 3)"},
		{Kind: "state", State: "leased", Agent: "alpha", Host: "host-a", Message: "unassigned", Attempt: 2},
		{Kind: "log", Agent: "alpha", Stream: "stdout", Message: "two\n", Attempt: 2},
		{Kind: "state", State: "succeeded", Agent: "alpha", Host: "host-a", Attempt: 2},
	}
	require.Equal(t, want, page, "the page reader (API, CLI, console)")
	require.Equal(t, want, view, "the view (psql)")
	require.IsIncreasing(t, ids, "ids give the order, as the pages follow them")
	require.Equal(t, len(want)-2, rowsOf(task.ExecutionID),
		"the last lease and the success are the row's columns; every other fact is an event row")

	var durationMs int64
	var leasedAt, finishedAt time.Time
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT v.duration_ms, t.leased_at, t.finished_at
		FROM ax.all_task_events v JOIN ax.all_tasks t ON t.id = v.task_id
		WHERE v.execution_id = $1 AND v.state = 'succeeded'`, task.ExecutionID).Scan(&durationMs, &leasedAt, &finishedAt))
	require.InDelta(t, finishedAt.Sub(leasedAt).Milliseconds(), durationMs, 1, "a success lasts from its lease to its result")

	// A run cancelled while alpha holds it: alpha's lease, then the cancel
	// alpha reports.
	cancelled := e.trigger(1, time.Minute)
	held := e.lease(alpha)
	require.Len(t, held, 1)
	e.cancel(cancelled.ExecutionID, "operator")
	complete(alpha, held[0], axtype.TaskCancelled, "cancelled by its agent")
	page, view, _ = seen(cancelled.ExecutionID)
	want = []seenEvent{
		{Kind: "state", State: "leased", Agent: "alpha", Host: "host-a", Message: "unassigned", Attempt: 1},
		{Kind: "state", State: "cancelled", Agent: "alpha", Host: "host-a", Message: "cancelled by its agent", Attempt: 1},
	}
	require.Equal(t, want, page)
	require.Equal(t, want, view)

	// A run beta hands back (a draining agent's release), then alpha runs.
	handed := e.trigger(1, time.Minute)
	e.heartbeat(beta) // back after its silence
	back := e.lease(beta)
	require.Len(t, back, 1)
	released, err := e.broker.Release(ctx, beta.ID, []axtype.TaskRef{{ID: back[0].ID, Token: back[0].LeaseToken}})
	require.NoError(t, err)
	require.Len(t, released, 1)
	again := e.lease(alpha)
	require.Len(t, again, 1)
	complete(alpha, again[0], axtype.TaskSucceeded, "")
	page, view, _ = seen(handed.ExecutionID)
	want = []seenEvent{
		{Kind: "state", State: "leased", Agent: "beta", Host: "host-b", Message: "unassigned", Attempt: 1},
		{Kind: "state", State: "pending", Agent: "beta", Host: "host-b", Message: "released by its agent", Attempt: 1},
		{Kind: "state", State: "leased", Agent: "alpha", Host: "host-a", Message: "unassigned", Attempt: 1},
		{Kind: "state", State: "succeeded", Agent: "alpha", Host: "host-a", Attempt: 1},
	}
	require.Equal(t, want, page)
	require.Equal(t, want, view)
	require.Equal(t, 2, rowsOf(handed.ExecutionID), "the released lease is written down before the next")

	// The agents' records count the same facts: alpha two successes and
	// one failure in the window (a cancel is neither), four leases of its
	// own; beta two leases and no outcome.
	agents, err := e.broker.List(ctx, &db.AgentListParams{Limit: 10})
	require.NoError(t, err)
	record := map[string]string{}
	for _, a := range agents {
		record[a.Name] = fmt.Sprintf("succeeded=%d failed=%d leases=%d routed=%d", a.Recent.Succeeded, a.Recent.Failed,
			a.Recent.Leases, a.Recent.Routed)
	}
	require.Equal(t, map[string]string{
		"alpha": "succeeded=2 failed=1 leases=4 routed=4",
		"beta":  "succeeded=0 failed=0 leases=2 routed=2",
	}, record)
}

// eventsAgent registers an agent on host (ip) with labels, running shell
// and HTTP tasks, and names it in names.
func eventsAgent(t *testing.T, e *clockEnv, names map[uuid.UUID]string, name, host, ip string,
	labels map[string]string) *axtype.Agent {
	t.Helper()
	ctx := context.Background()
	key, err := db.APIKeyInsert(ctx, e.pool, &db.APIKeyInsertParams{ID: uuid.New(), Name: name,
		Hash: []byte(uuid.NewString()), Prefix: "ax_", Scopes: []string{"agent"}})
	require.NoError(t, err)
	a, err := e.broker.Register(ctx, &axtype.Agent{Name: name, Capacity: 4, Weight: 1, APIKeyID: key.ID,
		Executors: []string{"shell", "http"}, HostName: host, HostIP: ip, Labels: labels})
	require.NoError(t, err)
	e.heartbeat(a)
	names[a.ID] = name
	return a
}

// seenEvents is a run's events as the page reader and the view show them,
// agents by their names, and the events' ids.
func seenEvents(t *testing.T, e *clockEnv, names map[uuid.UUID]string, run uuid.UUID) (page, view []seenEvent, ids []int64) {
	t.Helper()
	ctx := context.Background()
	events, err := db.TaskEventListByExecution(ctx, e.pool, &db.TaskEventListParams{
		ExecutionID: run, Limit: 100, MaxBytes: 1 << 20})
	require.NoError(t, err)
	for _, ev := range events {
		s := seenEvent{Kind: string(ev.Kind), State: string(ev.State), Host: ev.WorkerHost, Stream: ev.Stream,
			Message: ev.Message, Attempt: ev.Attempt}
		if ev.AgentID != nil {
			s.Agent = names[*ev.AgentID]
		}
		page = append(page, s)
		ids = append(ids, ev.ID)
	}
	rows, err := e.pool.Query(ctx, `
		SELECT kind::text, coalesce(state::text, ''), agent_id, coalesce(worker_host, ''), coalesce(stream, ''),
		       message, attempt
		FROM ax.all_task_events WHERE execution_id = $1 ORDER BY id`, run)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var s seenEvent
		var agent *uuid.UUID
		require.NoError(t, rows.Scan(&s.Kind, &s.State, &agent, &s.Host, &s.Stream, &s.Message, &s.Attempt))
		if agent != nil {
			s.Agent = names[*agent]
		}
		view = append(view, s)
	}
	require.NoError(t, rows.Err())
	return page, view, ids
}

// An HTTP task whose target answers 202 leaves its agent: the row gives up
// the agent, so its lease is written down as an event (by the agent, from
// its host, at the lease's time) before the event that hands it to its
// target, and the target's result posted later ends it. The page reader
// and the view show the same facts.
func TestEventsShowAnHTTPTaskItsTargetAccepted(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	names := map[uuid.UUID]string{}
	alpha := eventsAgent(t, e, names, "alpha", "host-a", "192.0.2.1", map[string]string{"pool": "web"})
	job := e.create(func(j *axtype.Job) {
		j.ExecutorKind = axtype.ExecutorHTTP
		j.Executor = axtype.ExecutorConfig{URL: "https://target.example/run", Method: "POST"}
		j.TargetLabels = map[string]string{"pool": "web"}
		j.TimeoutSeconds = 3600
	})
	task := e.fire(job)
	leased := e.lease(alpha)
	require.Len(t, leased, 1)
	e.clock.Advance(time.Second)
	ref := axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}
	done, err := e.broker.Complete(ctx, alpha.ID, []axtype.TaskResult{{TaskRef: ref, State: dispatch.ResultAccepted}})
	require.NoError(t, err)
	require.Len(t, done, 1)
	require.Equal(t, axtype.TaskRunning, done[0].State, "awaiting its target")

	var agent *uuid.UUID
	var leasedAt, leaseEventAt time.Time
	require.NoError(t, e.pool.QueryRow(ctx, `
		SELECT t.agent_id, t.leased_at, (SELECT v.at FROM ax.task_event v WHERE v.task_id = t.id AND v.state = 'leased')
		FROM ax.task t WHERE t.id = $1`, task.ID).Scan(&agent, &leasedAt, &leaseEventAt))
	require.Nil(t, agent, "no agent holds a task its target accepted")
	require.True(t, leaseEventAt.Equal(leasedAt), "the lease's event keeps the lease's time: %s, %s", leaseEventAt, leasedAt)

	state, err := delivery.NewTaskCompleter(e.pool, nil, nil, nil).Complete(ctx,
		axtype.TaskResult{TaskRef: ref, State: axtype.TaskSucceeded})
	require.NoError(t, err)
	require.Equal(t, axtype.TaskSucceeded, state)

	page, view, ids := seenEvents(t, e, names, task.ExecutionID)
	want := []seenEvent{
		{Kind: "state", State: "leased", Agent: "alpha", Host: "host-a", Message: "unassigned", Attempt: 1},
		{Kind: "state", State: "running", Agent: "alpha", Host: "host-a", Attempt: 1,
			Message: "accepted by its target (202): its result is awaited at the completion URL"},
		{Kind: "state", State: "succeeded", Attempt: 1},
	}
	require.Equal(t, want, page, "the page reader (API, CLI, console)")
	require.Equal(t, want, view, "the view (psql)")
	require.IsIncreasing(t, ids)
}
