package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// Defaults that recover (issue #17): what a job that says nothing about
// retries gets, and what happens to a task whose agent dies.

// setupClocked is the API with the agent protocol on a clock the test
// moves, and a reaper on the same clock.
func setupClocked(t *testing.T) (*apiEnv, *clock.Clock, *dispatch.Reaper) {
	t.Helper()
	c := clock.New()
	cfg := dispatch.AgentConfig{} // defaults: 30 s leases, heartbeats every 5 s
	env := setupConfig(t, func(oc *openapiConfig) { oc.Services.Agent, oc.Services.Clock = cfg, c })
	return env, c, dispatch.NewReaper(env.pool, cfg, dispatch.ReaperConfig{Clock: c})
}

// plainJob creates a manual shell job that sets nothing but its name,
// trigger and executor, and returns its id.
func (e *apiEnv) plainJob(name string) string {
	e.t.Helper()
	return e.call("POST", "/v1/jobs", e.admin, map[string]any{
		"name": name, "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "./work.sh"},
	}).must(e.t, http.StatusCreated)["id"].(string)
}

// onlyTask returns the one task of an execution as GET shows it, and the
// execution's state.
func (e *apiEnv) onlyTask(execID string) (task map[string]any, execState string) {
	e.t.Helper()
	got := e.call("GET", "/v1/executions/"+execID, e.admin, nil).must(e.t, http.StatusOK)
	tasks := got["tasks"].([]any)
	require.Len(e.t, tasks, 1)
	return tasks[0].(map[string]any), got["state"].(string)
}

// TestDefaultRetryPolicy: a job that sets no retry policy gets 3 retries,
// 5, 10 and 20 s after the failures (base 2 from 5 s, 35 s in all), and
// fails on the fourth failure.
func TestDefaultRetryPolicy(t *testing.T) {
	t.Parallel()
	env, c, _ := setupClocked(t)
	jobID := env.plainJob("defaults")
	job := env.call("GET", "/v1/jobs/"+jobID, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, map[string]any{"max_attempts": float64(4), "backoff_seconds": float64(5), "backoff_max_seconds": float64(600)},
		job["retry"], "the defaults are spelled out")
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)["id"].(string)
	a := env.registerAgent("a", nil, 1)

	var waited time.Duration
	for attempt, backoff := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 0} {
		attempt++
		tasks := a.lease(1, 0)
		require.Len(t, tasks, 1, "attempt %d is leasable", attempt)
		require.EqualValues(t, attempt, tasks[0]["attempt"])
		require.EqualValues(t, 4, tasks[0]["max_attempts"])
		before := *c.Now()
		a.complete(tasks[0], "failed").must(t, http.StatusOK)
		after := *c.Now()
		task, state := env.onlyTask(exec)
		if backoff == 0 {
			require.Equal(t, "failed", task["state"], "the fourth failure is final")
			require.Equal(t, "failed", state)
			require.EqualValues(t, 4, task["attempt"])
			break
		}
		require.Equal(t, "pending", task["state"])
		require.Equal(t, "running", state)
		require.EqualValues(t, attempt+1, task["attempt"])
		notBefore, err := time.Parse(time.RFC3339Nano, task["not_before"].(string))
		require.NoError(t, err)
		require.WithinRange(t, notBefore, before.Add(backoff).Add(-time.Microsecond), after.Add(backoff),
			"retry %d waits %s", attempt, backoff)
		require.Empty(t, a.lease(1, 0), "not before the backoff")
		c.Advance(backoff)
		waited += backoff
		a.heartbeat(nil).must(t, http.StatusOK)
	}
	require.Equal(t, 35*time.Second, waited)
	require.Less(t, waited, 100*time.Second, "the default policy gives up within 100 s of waiting")
	require.Empty(t, a.lease(1, 0))
}

// TestLostLeasesRunAgainThenFailAsLost: a task whose agent dies with it
// (lease expired, agent silent, then offline) runs again at once on
// another agent on the same attempt: the job's retries are left whole.
// The third lease lost so fails the task with error "lost: …"; each loss
// shows in the task's lost_leases and in its events.
func TestLostLeasesRunAgainThenFailAsLost(t *testing.T) {
	t.Parallel()
	env, c, reaper := setupClocked(t)
	exec := env.trigger(env.plainJob("doomed"), "", "").must(t, http.StatusAccepted)["id"].(string)
	ctx := context.Background()

	for lost := 1; lost <= dispatch.DefaultMaxLostLeases; lost++ {
		a := env.registerAgent(fmt.Sprintf("agent-%d", lost), nil, 1)
		tasks := a.lease(1, 0)
		require.Len(t, tasks, 1, "agent %d takes the task at once", lost)
		require.EqualValues(t, 1, tasks[0]["attempt"], "no attempt used up by the lost leases before")
		a.heartbeat(tasks).must(t, http.StatusOK) // running
		// The agent dies: no heartbeat for more than a lease.
		c.Advance(31 * time.Second)
		require.NoError(t, reaper.Sweep(ctx))
		require.Equal(t, "offline", env.agentState(a.id))

		task, state := env.onlyTask(exec)
		require.EqualValues(t, lost, task["lost_leases"])
		require.EqualValues(t, 1, task["attempt"], "a lost lease uses up no attempt")
		require.EqualValues(t, 4, task["max_attempts"])
		if lost < dispatch.DefaultMaxLostLeases {
			require.Equal(t, "pending", task["state"])
			require.Equal(t, "running", state)
			require.Equal(t, "lease lost: agent offline or silent", task["error"])
			continue
		}
		require.Equal(t, "failed", task["state"], "the third lost lease fails the task")
		require.Equal(t, "failed", state)
		require.Equal(t, "lost: the lease was lost 3 times, its agent offline or silent each time", task["error"])
	}

	var reaped []string
	for _, ev := range env.call("GET", "/v1/executions/"+exec+"/logs?kind=state", env.admin, nil).
		must(t, http.StatusOK)["events"].([]any) {
		if ev := ev.(map[string]any); ev["state"] != "leased" {
			require.EqualValues(t, 1, ev["attempt"])
			reaped = append(reaped, ev["state"].(string)+": "+ev["message"].(string))
		}
	}
	require.Equal(t, []string{
		"pending: lease lost: agent offline or silent: runs again at once on the same attempt (lost leases: 1 of 3)",
		"pending: lease lost: agent offline or silent: runs again at once on the same attempt (lost leases: 2 of 3)",
		"failed: lost: the lease was lost 3 times, its agent offline or silent each time",
	}, reaped)
}

// TestExpiredLeaseOfALiveAgentUsesAnAttempt: a lease that runs out while
// its agent goes on heartbeating (it dropped the task) is the task's
// failed attempt, not a lost agent: retried after backoff, attempt + 1.
func TestExpiredLeaseOfALiveAgentUsesAnAttempt(t *testing.T) {
	t.Parallel()
	env, c, reaper := setupClocked(t)
	exec := env.trigger(env.plainJob("dropped"), "", "").must(t, http.StatusAccepted)["id"].(string)
	a := env.registerAgent("a", nil, 1)
	require.Len(t, a.lease(1, 0), 1)
	for range 7 { // 35 s of heartbeats that do not name the task
		c.Advance(5 * time.Second)
		a.heartbeat(nil).must(t, http.StatusOK)
	}
	require.NoError(t, reaper.Sweep(context.Background()))
	require.Equal(t, "active", env.agentState(a.id))
	task, _ := env.onlyTask(exec)
	require.Equal(t, "pending", task["state"])
	require.EqualValues(t, 2, task["attempt"])
	require.EqualValues(t, 0, task["lost_leases"])
	require.Equal(t, "lease expired", task["error"])
}
