package openapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
)

// A job with timeout_mode adaptive shows its current timeout and how it
// was computed; a fire uses it (the run's task shows it); a job that
// names no mode is fixed and shows none, as before.
func TestAdaptiveTimeoutShownAndUsed(t *testing.T) {
	t.Parallel()
	env := setup(t)
	body := map[string]any{"name": "adaptive", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "./work.sh"}, "timeout_mode": "adaptive", "timeout_seconds": 120}
	job := env.call("POST", "/v1/jobs", env.admin, body).must(t, http.StatusCreated)
	id := job["id"].(string)
	require.Equal(t, "adaptive", job["timeout_mode"])
	require.Equal(t, map[string]any{"timeout_seconds": float64(120), "basis": "no_history", "samples": float64(0),
		"explanation": "no successful attempt measured yet: timeout_seconds, 120 s, the start value"}, job["adaptive_timeout"])

	// Successes of 1 s … 20 s: P95 19 s, so 57 s.
	durations := make([]int64, 20)
	for i := range durations {
		durations[i] = int64(i+1) * 1000
	}
	env.history(id, durations)
	run := env.call("POST", "/v1/jobs/"+id+"/trigger", env.admin, map[string]any{}).must(t, http.StatusAccepted)
	exec := env.call("GET", "/v1/executions/"+run["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, float64(57), exec["tasks"].([]any)[0].(map[string]any)["timeout_seconds"])

	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	shown := got["adaptive_timeout"].(map[string]any)
	require.NotEmpty(t, shown["measured_at"])
	delete(shown, "measured_at")
	require.Equal(t, map[string]any{"timeout_seconds": float64(57), "basis": "p95", "samples": float64(20),
		"p95_seconds": float64(19), "explanation": "3 × P95 of 20 successful attempts (3 × 19 s = 57 s), rounded up: 57 s"}, shown)
	require.Equal(t, float64(120), got["timeout_seconds"], "timeout_seconds stays the ceiling")

	// What GET shows can be PUT back (adaptive_timeout is read-only).
	env.call("PUT", "/v1/jobs/"+id, env.admin, got).must(t, http.StatusOK)
	// A lower ceiling applies at once to the stored measure.
	got["timeout_seconds"] = 30
	lowered := env.call("PUT", "/v1/jobs/"+id, env.admin, got).must(t, http.StatusOK)
	require.Equal(t, float64(30), lowered["adaptive_timeout"].(map[string]any)["timeout_seconds"])
	require.Equal(t, "ceiling", lowered["adaptive_timeout"].(map[string]any)["basis"])

	// Back to fixed: no adaptive_timeout.
	req, err := http.NewRequest("PATCH", env.url+"/v1/jobs/"+id, stringsReader(`{"timeout_mode":"fixed"}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	req.Header.Set("Authorization", "Bearer "+env.admin)
	patched := env.do(req).must(t, http.StatusOK)
	require.Equal(t, "fixed", patched["timeout_mode"])
	require.NotContains(t, patched, "adaptive_timeout")

	// A job that names no mode is fixed.
	plain := env.call("POST", "/v1/jobs", env.admin, cronJob("plain", "0 0 8 * * ?", "UTC")).must(t, http.StatusCreated)
	require.Equal(t, "fixed", plain["timeout_mode"])
	require.NotContains(t, plain, "adaptive_timeout")
}

// Bad timeout modes are refused with a problem naming the field.
func TestAdaptiveTimeoutValidation(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for _, c := range []struct {
		set   map[string]any
		field string
	}{
		{map[string]any{"timeout_mode": "sometimes"}, "body.timeout_mode"},
		{map[string]any{"timeout_mode": "adaptive", "timeout_seconds": 4}, "body.timeout_seconds"},
		{map[string]any{"timeout_mode": 3}, "body.timeout_mode"},
	} {
		body := cronJob("bad", "0 0 8 * * ?", "UTC")
		for k, v := range c.set {
			body[k] = v
		}
		resp := env.call("POST", "/v1/jobs", env.admin, body)
		resp.must(t, http.StatusUnprocessableEntity)
		require.Contains(t, resp.errorLocations(), c.field, "%v: %s", c.set, resp.raw)
	}
	require.Zero(t, env.countJobs())
	body := cronJob("edge", "0 0 8 * * ?", "UTC")
	body["timeout_mode"], body["timeout_seconds"] = "adaptive", 5
	env.call("POST", "/v1/jobs", env.admin, body).must(t, http.StatusCreated)
}

// history records succeeded runs of job, one task each, that ended a
// minute ago after running durations (milliseconds) from lease to result.
func (e *apiEnv) history(job string, durations []int64) {
	e.t.Helper()
	took := make([]time.Duration, len(durations))
	for i, ms := range durations {
		took[i] = time.Duration(ms) * time.Millisecond
	}
	dbtest.EndedRuns(e.t, e.pool, uuid.MustParse(job), time.Minute, "succeeded", took...)
}
