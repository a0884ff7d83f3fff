package openapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAgentlessHTTPTimeoutIsCapped: an HTTP job ax sends itself (no target
// labels) may not wait longer than 900 s for its answer: a longer
// timeout_seconds is refused with a problem naming the field (job create,
// update, ad-hoc run) and changes nothing; without one it gets 900. Jobs
// run by agents keep the one-week limit.
func TestAgentlessHTTPTimeoutIsCapped(t *testing.T) {
	t.Parallel()
	env := setup(t)
	httpJob := func(name string, timeout int, labels map[string]string) map[string]any {
		j := map[string]any{"name": name, "trigger": map[string]any{"kind": "manual"},
			"executor": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/run"}}
		if timeout > 0 {
			j["timeout_seconds"] = timeout
		}
		if labels != nil {
			j["target"] = map[string]any{"labels": labels}
		}
		return j
	}
	refused := func(r *response) {
		t.Helper()
		r.must(t, http.StatusUnprocessableEntity)
		require.Equal(t, []string{"body.timeout_seconds"}, r.errorLocations(), string(r.raw))
		require.Contains(t, string(r.raw), "at most 900")
	}

	refused(env.call("POST", "/v1/jobs", env.admin, httpJob("slow", 901, nil)))
	refused(env.call("POST", "/v1/jobs", env.admin, httpJob("week", 604800, nil)))
	refused(env.call("POST", "/v1/runs", env.admin, map[string]any{
		"executor": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/run"}, "timeout_seconds": 3600}))
	require.Equal(t, 0, env.countJobs(), "a refused job is not saved")

	capped := env.call("POST", "/v1/jobs", env.admin, httpJob("capped", 0, nil)).must(t, http.StatusCreated)
	require.EqualValues(t, 900, capped["timeout_seconds"], "the default of an agentless HTTP job is the cap")
	env.call("POST", "/v1/jobs", env.admin, httpJob("at-cap", 900, nil)).must(t, http.StatusCreated)
	update := httpJob("capped", 1200, nil)
	refused(env.call("PUT", "/v1/jobs/"+capped["id"].(string), env.admin, update))
	got := env.call("GET", "/v1/jobs/"+capped["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.EqualValues(t, 900, got["timeout_seconds"], "a refused update changes nothing")

	onAgents := env.call("POST", "/v1/jobs", env.admin, httpJob("on-agents", 86400, map[string]string{"pool": "a"})).
		must(t, http.StatusCreated)
	require.EqualValues(t, 86400, onAgents["timeout_seconds"])
	shell := env.call("POST", "/v1/jobs", env.admin, map[string]any{"name": "shell", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}}).must(t, http.StatusCreated)
	require.EqualValues(t, 3600, shell["timeout_seconds"], "other jobs keep the hour by default")
}
