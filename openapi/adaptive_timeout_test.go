package openapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
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
	ids := make([]uuid.UUID, len(durations))
	for i := range ids {
		ids[i] = uuid.Must(uuid.NewV7())
	}
	// Where ended runs are: in history, their success events with the
	// time from lease to result.
	_, err := e.pool.Exec(context.Background(), `
		WITH runs AS (
		    SELECT h.id, h.ms, gen_random_uuid() AS task_id, now() - interval '1 minute' AS finished_at,
		           now() - interval '1 minute' - make_interval(secs => h.ms / 1000.0) AS leased_at
		    FROM unnest($1::uuid[], $2::bigint[]) AS h(id, ms)
		), execs AS (
		    INSERT INTO ax.execution_history (id, job_id, cause, scheduled_for, state, shard_count, priority, started_at,
		                                      finished_at, retain_until)
		    SELECT id, $3, 'manual', leased_at, 'succeeded', 1, 0, leased_at, finished_at, finished_at + interval '7 days'
		    FROM runs
		), tasks AS (
		    INSERT INTO ax.task_history (id, execution_id, job_id, shard_index, shard_total, state, priority, max_attempts,
		                                 timeout_seconds, leased_at, started_at, finished_at, retain_until)
		    SELECT task_id, id, $3, 0, 1, 'succeeded', 0, 1, 120, leased_at, leased_at, finished_at,
		           finished_at + interval '7 days'
		    FROM runs
		)
		INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message, at, duration_ms)
		SELECT task_id, id, 0, 1, 'state', 'succeeded', '', finished_at, ms FROM runs`,
		ids, durations, job)
	require.NoError(e.t, err)
}
