package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// A broadcast run's task is pinned to its agent: no other may take it.
// When that agent goes offline before it leased the task, the task fails
// (error code agent_offline) and the run ends, instead of waiting pending
// for an agent that may never come back, its run open for good. The
// failure is not the agent's: its event names no agent.
func TestBroadcastTaskOfAnAgentGoneOfflineFails(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	stays, goes := e.agent("stays"), e.agent("goes")
	job := e.create(func(j *axtype.Job) { j.RouteStrategy = axtype.RouteBroadcast })
	run := testfactory.Execution(ctx, t, e.pool, job.ID, fireOpts(nil))
	taskOf := func(a *axtype.Agent) uuid.UUID {
		var id uuid.UUID
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT id FROM ax.all_tasks WHERE execution_id = $1 AND preferred_agent_id = $2`,
			run.ID, a.ID).Scan(&id))
		return id
	}
	staysTask, goesTask := taskOf(stays), taskOf(goes)
	leased := e.lease(stays)
	require.Len(t, leased, 1)
	require.Equal(t, staysTask, leased[0].ID)
	_, err := db.TaskComplete(ctx, e.pool, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}, State: axtype.TaskSucceeded}})
	require.NoError(t, err)

	e.clock.Advance(3*e.broker.Config().HeartbeatInterval + time.Second)
	e.heartbeat(stays)
	e.sweep()
	state, _ := e.task(goesTask)
	require.Equal(t, "failed", state)
	var code string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT error_code FROM ax.all_tasks WHERE id = $1`, goesTask).Scan(&code))
	require.Equal(t, axtype.ErrorCodeAgentOffline, code)
	var events, ofAgent int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*), count(agent_id) FROM ax.all_task_events
		WHERE task_id = $1 AND state = 'failed'`, goesTask).Scan(&events, &ofAgent))
	require.Equal(t, 1, events, "the failure is an event of the task")
	require.Zero(t, ofAgent, "not the agent's: it did not run the task (its health must not count it)")
	var runState string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state::text FROM ax.all_executions WHERE id = $1`, run.ID).Scan(&runState))
	require.Equal(t, "failed", runState, "the run ends")
}

// A re-run of a broadcast shard pins it to its agent again. Once the
// cleanup has deleted that agent (offline past the history horizon: its
// run can outlive it when the run's other shards ran long), the task was
// pinned to no agent at all, and the sweep, which looked for offline
// agents, left it pending for good, its re-run never ending. It fails as
// a shard of an offline agent does.
func TestRerunShardOfAnAgentNoMoreFails(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	stays, goes := e.agent("stays"), e.agent("goes")
	job := e.create(func(j *axtype.Job) { j.RouteStrategy = axtype.RouteBroadcast })
	run := testfactory.Execution(ctx, t, e.pool, job.ID, fireOpts(nil))
	leased := e.lease(stays)
	require.Len(t, leased, 1)
	_, err := db.TaskComplete(ctx, e.pool, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}, State: axtype.TaskSucceeded}})
	require.NoError(t, err)
	e.clock.Advance(3*e.broker.Config().HeartbeatInterval + time.Second)
	e.heartbeat(stays)
	e.sweep()
	var runState string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state::text FROM ax.all_executions WHERE id = $1`, run.ID).Scan(&runState))
	require.Equal(t, "failed", runState, "the offline agent's shard failed")

	_, err = e.pool.Exec(ctx, `DELETE FROM ax.agent WHERE id = $1`, goes.ID) // as AgentPruneGone does
	require.NoError(t, err)
	rerun := uuid.Must(uuid.NewV7())
	tasks, err := db.ExecutionRerunInsert(ctx, e.pool, &db.NewRerun{ID: rerun, RerunOf: run.ID, Shards: axtype.RerunFailed},
		(*dispatch.TaskRouter)(nil).RouteFunc(e.pool))
	require.NoError(t, err)
	require.Len(t, tasks, 1, "the failed shard, pinned to its agent")

	e.heartbeat(stays)
	e.sweep()
	state, _ := e.task(tasks[0].ID)
	require.Equal(t, "failed", state, "pinned to an agent that is no more, it fails")
	var code string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT error_code FROM ax.all_tasks WHERE id = $1`, tasks[0].ID).Scan(&code))
	require.Equal(t, axtype.ErrorCodeAgentOffline, code)
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state::text FROM ax.all_executions WHERE id = $1`, rerun).Scan(&runState))
	require.Equal(t, "failed", runState, "the re-run ends")
}
