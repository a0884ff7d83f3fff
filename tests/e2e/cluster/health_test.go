package cluster

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// Health that routing reads (issue #17), with real `ax serve` and ax-agent
// processes: least_active's tie-break by recent average duration, and the
// host of each lease and result on the task events.

// TestSlowAgentLosesLeastActiveTieBreak: two agents, equally idle, one
// whose tasks take 3 s (its tools are slow: WORK_SECONDS, which only its
// process is told) and one whose tasks take 0.1 s (1.5 s was too close: on
// a loaded machine the fast agent's run took 0.99 s from lease to result). Once both have a
// record, least_active sends every run fired while both are idle to the
// fast one. The events of each run name the host that leased and ran it,
// as the API and `ax exec logs -states` show.
func TestSlowAgentLosesLeastActiveTieBreak(t *testing.T) {
	t.Parallel()
	s := routedServer(t, dbtest.NewURL(t), "30s")
	s.RunAgent(t, "fast", s.URL, "WORK_SECONDS=0.1", "AX_AGENT_HOST_NAME=fast-host.test")
	s.RunAgent(t, "slow", s.URL, "WORK_SECONDS=3", "AX_AGENT_HOST_IP=10.9.8.7")
	fastID, slowID := s.AgentReady(t, "fast"), s.AgentReady(t, "slow")
	work := e2ekit.Shell(`sleep "$WORK_SECONDS"; echo done`)

	// A record for each: round robin gives each agent one run of a pair.
	warm := s.CreateJob(t, map[string]any{"name": "warm", "trigger": e2ekit.Manual, "executor": work,
		"route": map[string]any{"strategy": "round_robin"}})
	warmed := fireAndWait(t, s, warm, 2, nil)
	require.Equal(t, map[string]int{fastID: 1, slowID: 1}, ranOn(t, s, warmed), "one warm-up run on each")
	fastAvg := s.AgentNamed(t, "fast")["recent"].(map[string]any)["avg_duration_seconds"].(float64)
	slowAvg := s.AgentNamed(t, "slow")["recent"].(map[string]any)["avg_duration_seconds"].(float64)
	require.Greater(t, slowAvg, fastAvg+1, "the slow agent's record is slower")

	tie := s.CreateJob(t, map[string]any{"name": "tie", "trigger": e2ekit.Manual, "executor": work,
		"route": map[string]any{"strategy": "least_active"}})
	var runs []string
	for range 5 {
		waitBothIdle(t, s)
		id := s.Fire(t, tie, nil)
		require.Equal(t, "succeeded", s.WaitExecution(t, id, 30*time.Second))
		runs = append(runs, id)
	}
	for i, id := range runs {
		require.Equal(t, lease{By: fastID, How: "routed here", ResultBy: fastID, Result: "succeeded"}, leaseOf(t, s, id),
			"run %d: the agents were equally idle, the fast one wins the tie", i)
	}
	require.Equal(t, 1, served(s.AgentNamed(t, "slow")), "the slow agent leased only its warm-up run")

	// Where each lease and result ran, on the events.
	for _, id := range warmed {
		l := leaseOf(t, s, id)
		want := map[string][2]string{"leased": {"fast-host.test", "127.0.0.1"}, "succeeded": {"fast-host.test", "127.0.0.1"}}
		if l.By == slowID {
			host := eventHosts(t, s, id)["leased"][0]
			require.NotEmpty(t, host, "the slow agent's host name is the machine's")
			want = map[string][2]string{"leased": {host, "10.9.8.7"}, "succeeded": {host, "10.9.8.7"}}
		}
		require.Equal(t, want, eventHosts(t, s, id), "run %s on %s", id, l.By)
	}
	out, err := s.AX(t, "exec", "logs", runs[0], "--states")
	require.NoError(t, err)
	require.Contains(t, out, "shard 0 [state] leased on fast-host.test (127.0.0.1): routed here\n")
	require.Contains(t, out, "shard 0 [state] succeeded on fast-host.test (127.0.0.1)\n")
	require.Contains(t, out, "shard 0 [stdout] done\n")
	plain, err := s.AX(t, "exec", "logs", runs[0])
	require.NoError(t, err)
	require.Equal(t, "shard 0 [stdout] done\n", plain, "without -states, output only")

	// The agents report their free disk.
	for _, name := range []string{"fast", "slow"} {
		require.Positive(t, s.AgentNamed(t, name)["disk_free_bytes"], name)
	}
}

// waitBothIdle waits until the agents run nothing and have said so: a
// heartbeat after their last task ended, and the router's snapshot of the
// agents refreshed after that heartbeat.
func waitBothIdle(t *testing.T, s *e2ekit.Server) {
	t.Helper()
	start := time.Now().UTC()
	require.Eventually(t, func() bool {
		for _, name := range []string{"fast", "slow"} {
			a := s.AgentNamed(t, name)
			beat, err := time.Parse(time.RFC3339Nano, a["last_heartbeat_at"].(string))
			if err != nil || a["running"] != float64(0) || !beat.After(start) {
				return false
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond, "both agents idle and heard from")
	time.Sleep(routerRefresh) // the router reads the agents at most once a second
}

// eventHosts returns the worker host and IP of each state event of the
// run's task, by state.
func eventHosts(t *testing.T, s *e2ekit.Server, execID string) map[string][2]string {
	t.Helper()
	status, out := s.API(t, "GET", "/v1/executions/"+execID+"/logs?kind=state", nil)
	require.Equal(t, http.StatusOK, status, out)
	hosts := map[string][2]string{}
	for _, raw := range out["events"].([]any) {
		e := raw.(map[string]any)
		host, _ := e["worker_host"].(string)
		ip, _ := e["worker_ip"].(string)
		hosts[strings.TrimSpace(e["state"].(string))] = [2]string{host, ip}
	}
	return hosts
}
