package openapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/dispatch"
)

// Agents report an error code with a failure; bad codes are refused with a
// problem naming the field and record nothing; the execution shows each
// shard's code and counts them.
func TestAgentResultErrorCodes(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	job := cronJob("coded", "0 0 * * *", "UTC")
	job["shards"] = map[string]any{"count": 4}
	job["retry"] = map[string]any{"max_attempts": 1} // the failures are final
	jobID := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("a", nil, 4)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	tasks := a.lease(4, 5)
	require.Len(t, tasks, 4)
	result := func(task map[string]any, state, code string) map[string]any {
		r := map[string]any{"task_id": task["task_id"], "lease_token": task["lease_token"], "state": state,
			"error": "why: " + code}
		if code != "" {
			r["error_code"] = code
		}
		return r
	}
	complete := func(results ...map[string]any) *response {
		return a.post("/complete", map[string]any{"results": results})
	}

	for code, location := range map[string]string{
		"Exit_3":                "body.results[1].error_code",
		"exit 3":                "body.results[1].error_code",
		strings.Repeat("x", 65): "body.results[1].error_code",
	} {
		resp := complete(result(tasks[0], "failed", "exit_3"), result(tasks[1], "failed", code))
		resp.must(t, http.StatusUnprocessableEntity)
		require.Contains(t, resp.errorLocations(), location, code)
	}
	resp := complete(result(tasks[0], "succeeded", "exit_0"))
	resp.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.results[0].error_code"}, resp.errorLocations(), "a success has no error code")
	running := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	for _, task := range running["tasks"].([]any) {
		require.Equal(t, "leased", task.(map[string]any)["state"], "refused batches record nothing")
	}

	complete(result(tasks[0], "failed", "exit_3"), result(tasks[1], "failed", "exit_3"),
		result(tasks[2], "failed", "signal_killed"), result(tasks[3], "failed", "")).must(t, http.StatusOK)
	done := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "failed", done["state"])
	want := map[any]any{tasks[0]["task_id"]: "exit_3", tasks[1]["task_id"]: "exit_3",
		tasks[2]["task_id"]: "signal_killed", tasks[3]["task_id"]: nil}
	got := map[any]any{}
	for _, raw := range done["tasks"].([]any) {
		task := raw.(map[string]any)
		got[task["id"]] = task["error_code"]
	}
	require.Equal(t, want, got)
	require.Equal(t, map[string]any{"exit_3": float64(2), "signal_killed": float64(1)}, done["error_codes"])
}

// A target that answered 202 posts a failure with its code; a bad code is
// refused naming body.error_code and the token stays good.
func TestCompleteHTTPTaskErrorCode(t *testing.T) {
	t.Parallel()
	env := setupRiver(t)
	target := newHook(t, http.StatusAccepted, "")
	job := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "long-report", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": target.URL},
		"retry":    map[string]any{"max_attempts": 1},
	}).must(t, http.StatusCreated)
	exec := env.trigger(job["id"].(string), "", "").must(t, http.StatusAccepted)
	require.Eventually(t, func() bool { return target.count() == 1 }, 10*time.Second, 10*time.Millisecond)
	target.mu.Lock()
	path := strings.TrimPrefix(target.got[0].Header.Get("Ax-Completion-Url"), env.url)
	token := target.got[0].Header.Get("Ax-Completion-Token")
	target.mu.Unlock()

	for _, body := range []map[string]any{
		{"token": token, "state": "failed", "error": "x", "error_code": "Quota Exceeded"},
		{"token": token, "state": "succeeded", "error_code": "quota_exceeded"},
	} {
		resp := env.call("POST", path, "", body)
		resp.must(t, http.StatusUnprocessableEntity)
		require.Equal(t, []string{"body.error_code"}, resp.errorLocations())
	}
	env.call("POST", path, "", map[string]any{"token": token, "state": "failed", "error": "over quota",
		"error_code": "quota_exceeded"}).must(t, http.StatusOK)
	final := env.call("GET", exec["status_url"].(string)+"?wait=5s", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "failed", final["state"])
	require.Equal(t, "quota_exceeded", final["tasks"].([]any)[0].(map[string]any)["error_code"])
	require.Equal(t, map[string]any{"quota_exceeded": float64(1)}, final["error_codes"])
}
