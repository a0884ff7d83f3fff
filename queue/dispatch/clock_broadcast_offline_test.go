package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
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
