package dispatch_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// routed makes the env's executions go through a task router that reads
// the candidates afresh for every fire.
func (e *env) routed() *env {
	e.t.Helper()
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{Refresh: time.Nanosecond}, nil, nil)
	require.NoError(e.t, err)
	e.router = router
	return e
}

// routes returns each task's preferred agent, fallback and route key.
func (e *env) routes(execID uuid.UUID) []route {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), `SELECT id, coalesce(preferred_agent_id, '00000000-0000-0000-0000-000000000000'),
		coalesce(fallback_agent_id, '00000000-0000-0000-0000-000000000000'), route_key
		FROM ax.all_tasks WHERE execution_id = $1 ORDER BY shard_index`, execID)
	require.NoError(e.t, err)
	defer rows.Close()
	var out []route
	for rows.Next() {
		var r route
		require.NoError(e.t, rows.Scan(&r.task, &r.preferred, &r.fallback, &r.key))
		out = append(out, r)
	}
	require.NoError(e.t, rows.Err())
	return out
}

type route struct {
	task, preferred, fallback uuid.UUID
	key                       string
}

func TestLeaseKeepsTargetedTasksToMatchingAgents(t *testing.T) {
	e := setup(t, nil)
	gpuJob := e.job(func(j *axtype.Job) { j.TargetLabels = map[string]string{"pool": "gpu"} })
	gpuExec := e.trigger(gpuJob.ID)
	cpu := e.agent(map[string]string{"pool": "cpu"}, nil)
	bare := e.agent(nil, nil)
	noShell := e.agent(map[string]string{"pool": "gpu"}, func(a *axtype.Agent) { a.Executors = []string{"handler", "http"} })
	for _, a := range []*axtype.Agent{cpu, bare, noShell} {
		require.Empty(t, e.lease(a, 10), "agent %v may not take a gpu shell task", a.Labels)
	}

	// Labels are a subset match; an agent of a key bound to labels serves
	// its pools only, never untargeted jobs.
	bound := e.agent(map[string]string{"pool": "gpu", "zone": "a"}, func(a *axtype.Agent) { a.LabelBound = true })
	plainExec := e.trigger(e.job(nil).ID)
	got := e.lease(bound, 10)
	require.Len(t, got, 1)
	require.Equal(t, gpuExec.ID, got[0].ExecutionID)
	require.Empty(t, e.lease(bound, 10))
	got = e.lease(bare, 10)
	require.Len(t, got, 1)
	require.Equal(t, plainExec.ID, got[0].ExecutionID)
}

func TestRouterPrefersMatchingAgentsAndLeaseHonoursIt(t *testing.T) {
	const steal = 50 * time.Millisecond
	e := setup(t, func(c *dispatch.AgentConfig) { c.StealAfter = steal }).routed()
	gpu1, gpu2 := e.agent(map[string]string{"pool": "gpu"}, nil), e.agent(map[string]string{"pool": "gpu"}, nil)
	cpu := e.agent(map[string]string{"pool": "cpu"}, nil)
	e.agent(map[string]string{"pool": "cpu"}, nil)
	exec := e.trigger(e.job(func(j *axtype.Job) { j.TargetLabels = map[string]string{"pool": "gpu"}; j.ShardCount = 8 }).ID)

	byAgent := map[uuid.UUID][]uuid.UUID{}
	for _, r := range e.routes(exec.ID) {
		byAgent[r.preferred] = append(byAgent[r.preferred], r.task)
	}
	require.Len(t, byAgent[gpu1.ID], 4, "round robin alternates between the matching agents")
	require.Len(t, byAgent[gpu2.ID], 4)

	// The preferred agent gets its own tasks first, whatever their age.
	own := e.lease(gpu1, 4)
	require.ElementsMatch(t, byAgent[gpu1.ID], ids(own))
	for _, task := range own {
		require.True(t, task.RoutedHere)
	}

	// Past every steal delay a non-matching agent still gets nothing; a
	// matching one takes the rest over.
	e.eventually(func() bool {
		var waiting bool
		require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT bool_and(not_before < now() - make_interval(secs => $2))
			FROM ax.all_tasks WHERE execution_id = $1 AND state = 'pending'`, exec.ID, (4*steal).Seconds()).Scan(&waiting))
		return waiting
	}, "the steal delays to pass")
	require.Empty(t, e.lease(cpu, 8))
	taken := e.lease(gpu1, 8)
	require.ElementsMatch(t, byAgent[gpu2.ID], ids(taken))
	for _, task := range taken {
		require.False(t, task.RoutedHere, "taken over from gpu2")
	}
}

// A routed task is written once, its route with it: an update of its
// preferred agent afterwards would be a second row version with new index
// entries (never HOT: preferred_agent_id is indexed).
func TestRoutedTasksAreWrittenOnce(t *testing.T) {
	e := setup(t, nil)
	a1, a2 := e.agent(nil, nil), e.agent(nil, nil)
	pinnedJob := e.job(func(j *axtype.Job) { j.RouteStrategy = axtype.RouteBroadcast })
	shardedJob := e.job(func(j *axtype.Job) { j.ShardCount = 6 })
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{}, nil, nil)
	require.NoError(t, err)

	ctx := context.Background()
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	now, err := db.Now(ctx, tx)
	require.NoError(t, err)
	sharded, pinned := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	_, err = dispatch.InsertExecutions(ctx, tx, router, nil, []*axtype.NewExecution{
		{ID: sharded, JobID: shardedJob.ID, Cause: axtype.CauseManual, ScheduledFor: now},
		{ID: pinned, JobID: pinnedJob.ID, Cause: axtype.CauseManual, ScheduledFor: now}}, nil)
	require.NoError(t, err)
	var inserted, updated int64
	require.NoError(t, tx.QueryRow(ctx, `SELECT n_tup_ins, n_tup_upd FROM pg_stat_xact_user_tables
		WHERE relid = 'ax.task'::regclass`).Scan(&inserted, &updated))
	require.EqualValues(t, 6+2, inserted, "6 shards and a task per agent for the broadcast")
	require.Zero(t, updated, "no task row was written twice")
	require.NoError(t, tx.Commit(ctx))

	perAgent := map[uuid.UUID]int{}
	for _, r := range e.routes(sharded) {
		perAgent[r.preferred]++
	}
	require.Equal(t, map[uuid.UUID]int{a1.ID: 3, a2.ID: 3}, perAgent, "round robin over the two agents")
	var pinnedTo []uuid.UUID
	for _, r := range e.routes(pinned) {
		pinnedTo = append(pinnedTo, r.preferred)
	}
	require.ElementsMatch(t, []uuid.UUID{a1.ID, a2.ID}, pinnedTo)
}

func TestRouterKeepsARouteKeyOnOneAgent(t *testing.T) {
	e := setup(t, nil).routed()
	for range 3 {
		e.agent(nil, nil)
	}
	job := e.job(func(j *axtype.Job) { j.RouteStrategy = "consistent_hash"; j.RouteKey = "customer={{.params.customer}}" })
	trigger := func(params string) *axtype.Execution {
		opts := fireOpts(e.router)
		opts.Params = json.RawMessage(params)
		return testfactory.Execution(context.Background(), t, e.pool, job.ID, opts)
	}

	var first route
	for i := range 5 {
		rs := e.routes(trigger(`{"customer": 12345678901234567890}`).ID)
		require.Len(t, rs, 1)
		r := rs[0]
		require.Equal(t, "customer=12345678901234567890", r.key, "numbers render exactly")
		require.NotEqual(t, uuid.Nil, r.preferred)
		require.NotEqual(t, uuid.Nil, r.fallback, "a keyed task has a runner-up")
		require.NotEqual(t, r.preferred, r.fallback)
		if i == 0 {
			first = r
		}
		require.Equal(t, first.preferred, r.preferred, "the same key goes to the same agent")
		require.Equal(t, first.fallback, r.fallback)
	}

	// A key that does not render leaves the task unassigned, not lost.
	rs := e.routes(trigger(`{}`).ID)
	require.Len(t, rs, 1)
	require.Equal(t, uuid.Nil, rs[0].preferred)
	require.Empty(t, rs[0].key)
}
