package e2e

import (
	"context"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// startDeclaringAgent runs the SDK program of testdata/declaring-agent in
// phase (its version: "1" declares tick, report and cleanup; "2" changes
// tick and drops cleanup).
func startDeclaringAgent(t *testing.T, s *e2ekit.Server, key, phase string) *proctest.Process {
	t.Helper()
	return proctest.Start(t, proctest.Binary(t, "declaring-agent"), []string{
		"AX_SERVER=" + s.URL, "AX_AGENT_KEY=" + key, "AX_AGENT_NAME=declaring-" + phase, "DECLARE_PHASE=" + phase,
	})
}

// declaredJobs returns the jobs of group declared, by name, as the API
// shows them.
func declaredJobs(t *testing.T, s *e2ekit.Server) map[string]map[string]any {
	t.Helper()
	status, out := s.API(t, "GET", "/v1/jobs?group=declared", nil)
	require.Equal(t, http.StatusOK, status, out)
	jobs := map[string]map[string]any{}
	for _, j := range out["jobs"].([]any) {
		j := j.(map[string]any)
		jobs[j["name"].(string)] = j
	}
	return jobs
}

// succeededOn counts the succeeded tasks of job run by agent.
func succeededOn(t *testing.T, pool *pgxpool.Pool, jobID, agentID string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT count(*) FROM ax.all_tasks WHERE job_id = $1 AND agent_id = $2 AND state = 'succeeded'", jobID, agentID).Scan(&n))
	return n
}

// TestAgentDeclaresJobs: an agent program declaring three jobs with the
// SDK starts; they appear managed by it, and the 1 s one fires and runs
// on it. Started again as version 2 with one job changed and one dropped,
// it updates the one and pauses the other. The API refuses a PUT of a
// managed job; version 1 started again is refused as older, changing
// nothing.
func TestAgentDeclaresJobs(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	out, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "create",
		"--scope", "agent,submit").Output()
	require.NoError(t, err)
	key := strings.TrimSpace(string(out))

	v1 := startDeclaringAgent(t, s, key, "1")
	agentID := s.AgentReady(t, "declaring-1")
	var jobs map[string]map[string]any
	require.Eventually(t, func() bool { jobs = declaredJobs(t, s); return len(jobs) == 3 }, 30*time.Second, 100*time.Millisecond)
	for name, j := range jobs {
		require.Equal(t, "sdk:declaring-agent", j["managed_by"], name)
		require.Equal(t, "1", j["declared_version"], name)
		require.True(t, strings.HasPrefix(j["declared_in"].(string), "declaring-agent on "), j["declared_in"])
		require.Equal(t, map[string]any{"labels": map[string]any{"pool": "declared"}}, j["target"], "the agent's labels")
	}
	require.Equal(t, map[string]any{"kind": "interval", "interval_seconds": float64(1), "timezone": "UTC"}, jobs["tick"]["trigger"])
	require.Equal(t, map[string]any{"kind": "cron", "cron": "0 0 3 * * ?", "timezone": "Europe/Paris"}, jobs["report"]["trigger"])
	require.Equal(t, []any{"eu", "us"}, jobs["report"]["shards"].(map[string]any)["params"])
	require.Equal(t, "least_active", jobs["cleanup"]["route"].(map[string]any)["strategy"])
	require.Equal(t, float64(2), jobs["tick"]["retry"].(map[string]any)["max_attempts"])

	// tick fires every second and runs on the agent that declared it.
	tickID := jobs["tick"]["id"].(string)
	require.Eventually(t, func() bool { return succeededOn(t, pool, tickID, agentID) >= 2 },
		30*time.Second, 200*time.Millisecond, "tick runs on the declaring agent")

	v1.Signal(syscall.SIGTERM)
	require.NoError(t, v1.Wait(30*time.Second))
	reportUpdated := jobs["report"]["updated_at"]

	// Version 2: tick changed, report unchanged (not written), cleanup
	// dropped: paused, with the reason, not deleted.
	v2 := startDeclaringAgent(t, s, key, "2")
	agent2 := s.AgentReady(t, "declaring-2")
	require.Eventually(t, func() bool {
		jobs = declaredJobs(t, s)
		return jobs["tick"]["declared_version"] == "2" && jobs["cleanup"]["paused"] == true
	}, 30*time.Second, 100*time.Millisecond)
	require.Len(t, jobs, 3)
	require.Equal(t, float64(7), jobs["tick"]["priority"])
	require.Equal(t, reportUpdated, jobs["report"]["updated_at"], "an unchanged job is not written")
	require.Equal(t, "1", jobs["report"]["declared_version"], "the version that last changed it")
	require.Contains(t, jobs["cleanup"]["paused_reason"], "left out of declaration set sdk:declaring-agent at version 2")
	require.Eventually(t, func() bool { return succeededOn(t, pool, tickID, agent2) >= 1 },
		30*time.Second, 200*time.Millisecond, "tick runs on version 2")
	// The agent logs the pause when its declaration call returns, which a
	// loaded machine's agent did after its first runs.
	require.Eventually(t, func() bool { return strings.Contains(v2.Output(), `"msg":"declared job paused"`) },
		30*time.Second, 100*time.Millisecond, "the agent reports the paused job")

	// The API refuses to edit a managed job, saying where it is declared.
	tick := jobs["tick"]
	tick["description"] = "edited by hand"
	status, problem := s.API(t, "PUT", "/v1/jobs/"+tickID, tick)
	require.Equal(t, http.StatusConflict, status, problem)
	require.Contains(t, problem["detail"], "managed by sdk:declaring-agent, declared in declaring-agent on")
	require.Contains(t, problem["detail"], "?force=true")

	// Version 1 again (an old build restarting beside version 2): refused
	// as older, nothing changes, the conflict is shown and counted.
	v2.Signal(syscall.SIGTERM)
	require.NoError(t, v2.Wait(30*time.Second))
	old := startDeclaringAgent(t, s, key, "1")
	require.Eventually(t, func() bool { return strings.Contains(old.Output(), `"msg":"jobs not declared"`) },
		30*time.Second, 100*time.Millisecond)
	require.Contains(t, old.Output(), "is older and was not applied")
	after := declaredJobs(t, s)
	require.Equal(t, float64(7), after["tick"]["priority"])
	require.Equal(t, true, after["cleanup"]["paused"])
	status, sets := s.API(t, "GET", "/v1/declarations", nil)
	require.Equal(t, http.StatusOK, status, sets)
	set := sets["sets"].([]any)[0].(map[string]any)
	require.Equal(t, "2", set["version"])
	require.Equal(t, "1", set["conflict"].(map[string]any)["version"])
	require.Equal(t, 1.0, scrape(t, s.URL)[`ax_declaration_conflicts_total{reason="older_version"}`])
}

// createKey makes a key with `ax key create` and returns its secret.
func createKey(t *testing.T, s *e2ekit.Server, args ...string) string {
	t.Helper()
	out, err := exec.Command(proctest.Binary(t, "ax"),
		append([]string{"key", "--server", s.URL, "--key", s.Key, "create"}, args...)...).Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// TestSDKAgentKeepsItsSet (issue 36 item 3): the SDK agent of group
// declared declares its set with a key limited to that group; a submit
// key limited to another group then declares the same set at version
// 99999 with prune: 403, nothing paused, the version not bumped. The
// agent's next version still declares (no 409), and runs its jobs.
func TestSDKAgentKeepsItsSet(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	teamKey := createKey(t, s, "--scope", "agent,submit", "--groups", "declared")
	attacker := *s
	attacker.Key = createKey(t, s, "--scope", "submit", "--groups", "other")

	v1 := startDeclaringAgent(t, s, teamKey, "1")
	s.AgentReady(t, "declaring-1")
	require.Eventually(t, func() bool { return len(declaredJobs(t, s)) == 3 }, 30*time.Second, 100*time.Millisecond)
	v1.Signal(syscall.SIGTERM)
	require.NoError(t, v1.Wait(30*time.Second))

	status, problem := attacker.API(t, "POST", "/v1/declarations",
		map[string]any{"managed_by": "sdk:declaring-agent", "version": "99999", "prune": true, "jobs": []any{}})
	require.Equal(t, http.StatusForbidden, status, problem)
	for name, j := range declaredJobs(t, s) {
		require.Equal(t, false, j["paused"], name)
	}
	status, sets := attacker.API(t, "GET", "/v1/declarations", nil)
	require.Equal(t, http.StatusOK, status, sets)
	require.Empty(t, sets["sets"], "the other group's key sees no set")

	v2 := startDeclaringAgent(t, s, teamKey, "2")
	agent2 := s.AgentReady(t, "declaring-2")
	var jobs map[string]map[string]any
	require.Eventually(t, func() bool {
		jobs = declaredJobs(t, s)
		return jobs["tick"]["declared_version"] == "2" && jobs["cleanup"]["paused"] == true
	}, 30*time.Second, 100*time.Millisecond, "version 2 is declared: %s", v2.Output())
	require.NotContains(t, v2.Output(), `"msg":"jobs not declared`)
	require.Eventually(t, func() bool { return succeededOn(t, pool, jobs["tick"]["id"].(string), agent2) >= 1 },
		30*time.Second, 200*time.Millisecond, "tick runs on version 2")
	status, sets = s.API(t, "GET", "/v1/declarations", nil)
	require.Equal(t, http.StatusOK, status, sets)
	set := sets["sets"].([]any)[0].(map[string]any)
	require.Equal(t, "2", set["version"])
	require.Nil(t, set["conflict"])
}

// TestSDKAgentLogsForbiddenSet: an SDK agent whose group-limited key may
// not change its set (an unrestricted key applied it first) logs why its
// jobs were not declared, and declares nothing.
func TestSDKAgentLogsForbiddenSet(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	status, out := s.API(t, "POST", "/v1/declarations",
		map[string]any{"managed_by": "sdk:declaring-agent", "version": "1", "jobs": []any{}})
	require.Equal(t, http.StatusOK, status, out)
	agent := startDeclaringAgent(t, s, createKey(t, s, "--scope", "agent,submit", "--groups", "declared"), "1")
	require.Eventually(t, func() bool {
		return strings.Contains(agent.Output(),
			`"msg":"jobs not declared: the declaration set belongs to other job groups than the key's"`)
	}, 30*time.Second, 100*time.Millisecond)
	require.Contains(t, agent.Output(), "server answered 403")
	require.Empty(t, declaredJobs(t, s))
}
