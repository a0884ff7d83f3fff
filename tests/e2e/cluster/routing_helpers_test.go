package cluster

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// Helpers of the routing tests (issue #5): fires with params, where each
// run's task went and why, and the agents as GET /v1/agents shows them.

// routedServer is the timing of the routing tests: agents heartbeat every
// second (offline after 3 s, no longer routed to after 2 s), leases last
// 4 s, and a task routed to an agent waits steal before another may take
// it.
func routedServer(t *testing.T, dbURL, steal string, env ...string) *e2ekit.Server {
	t.Helper()
	return e2ekit.StartServerOn(t, dbURL, append([]string{"AX_LEASE=4s", "AX_HEARTBEAT_INTERVAL=1s",
		"AX_STEAL_AFTER=" + steal}, env...)...)
}

// fireAndWait fires n runs at once and waits until each has succeeded.
func fireAndWait(t *testing.T, s *e2ekit.Server, jobID string, n int, params map[string]any) []string {
	t.Helper()
	ids, states := fireAndSettle(t, s, jobID, n, params)
	for i, id := range ids {
		require.Equal(t, "succeeded", states[i], "execution %s", id)
	}
	return ids
}

// fireAndSettle fires n runs at once, waits until each has ended, and
// returns them with their final states.
func fireAndSettle(t *testing.T, s *e2ekit.Server, jobID string, n int, params map[string]any) (ids, states []string) {
	t.Helper()
	ids = make([]string, n)
	for i := range ids {
		ids[i] = s.Fire(t, jobID, params)
	}
	states = make([]string, n)
	for i, id := range ids {
		states[i] = s.WaitExecution(t, id, 30*time.Second)
	}
	return ids, states
}

// routerRefresh is how long `ax serve` reuses its view of the agents when
// routing (dispatch.TaskRouterConfig.Refresh, 1 s), with a margin: a test
// that changed which agents are healthy waits this long before it fires
// runs that must see the change.
const routerRefresh = 1500 * time.Millisecond

// lease is how the one task of a run was leased, from its task events
// (GET /v1/executions/{id}/logs?kind=state): by which agent, how ("routed
// here", "unassigned", "taken over from agent …"), and who reported the
// result.
type lease struct {
	By, How, ResultBy, Result string
}

// leaseOf returns the last lease of the run's task and its result.
func leaseOf(t *testing.T, s *e2ekit.Server, execID string) lease {
	t.Helper()
	status, out := s.API(t, "GET", "/v1/executions/"+execID+"/logs?kind=state", nil)
	require.Equal(t, http.StatusOK, status, out)
	var l lease
	for _, raw := range out["events"].([]any) {
		e := raw.(map[string]any)
		agent, _ := e["agent_id"].(string)
		msg, _ := e["message"].(string)
		switch e["state"] {
		case "leased":
			l.By, l.How = agent, msg
		case "succeeded", "failed", "timed_out", "cancelled":
			l.ResultBy, l.Result = agent, e["state"].(string)
		}
	}
	return l
}

// ranOn counts the runs by the agent that reported their result.
func ranOn(t *testing.T, s *e2ekit.Server, execIDs []string) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for _, id := range execIDs {
		counts[leaseOf(t, s, id).ResultBy]++
	}
	return counts
}

// route is the routing decision recorded on a task.
type route struct {
	Preferred, Fallback, Key string
}

// routesOf returns the routing decision of each run's task, read from
// ax.task.
func routesOf(t *testing.T, pool *pgxpool.Pool, execIDs []string) []route {
	t.Helper()
	out := make([]route, len(execIDs))
	for i, id := range execIDs {
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT coalesce(preferred_agent_id::text, ''), coalesce(fallback_agent_id::text, ''), route_key
			FROM ax.all_tasks WHERE execution_id = $1`, id).Scan(&out[i].Preferred, &out[i].Fallback, &out[i].Key))
	}
	return out
}

// agentState waits until the agent called name is in state.
func waitAgentState(t *testing.T, s *e2ekit.Server, name, state string, timeout time.Duration) map[string]any {
	t.Helper()
	var a map[string]any
	require.Eventually(t, func() bool {
		a = s.AgentNamed(t, name)
		return a != nil && a["state"] == state
	}, timeout, 100*time.Millisecond, "agent %s becomes %s", name, state)
	return a
}

// served is how many tasks an agent leased in the server's record window,
// as GET /v1/agents shows it.
func served(a map[string]any) int {
	return int(a["recent"].(map[string]any)["served"].(float64))
}
