package openapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A job's history retention is checked (1 s to 400 days, the error naming
// the field; a refused job is not stored), shown as set, and cleared by a
// PUT without it. GET /v1/history shows the server's retention.
func TestJobHistoryRetention(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for _, tt := range []struct {
		history  map[string]any
		location string
	}{
		{map[string]any{"retention_seconds": 0}, "body.history.retention_seconds"},
		{map[string]any{"failed_retention_seconds": 34560001}, "body.history.failed_retention_seconds"},
		{map[string]any{"retention_seconds": "7d"}, "body.history.retention_seconds"},
	} {
		job := cronJob("kept", "0 0 * * *", "UTC")
		job["history"] = tt.history
		resp := env.call("POST", "/v1/jobs", env.admin, job)
		resp.must(t, http.StatusUnprocessableEntity)
		require.Contains(t, resp.errorLocations(), tt.location, tt.history)
	}
	var jobs int
	require.NoError(t, env.pool.QueryRow(context.Background(), `SELECT count(*) FROM ax.job`).Scan(&jobs))
	require.Zero(t, jobs, "refused jobs are not stored")

	job := cronJob("kept", "0 0 * * *", "UTC")
	job["history"] = map[string]any{"retention_seconds": 86400, "failed_retention_seconds": 34560000}
	created := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)
	id := created["id"].(string)
	want := map[string]any{"retention_seconds": float64(86400), "failed_retention_seconds": float64(34560000)}
	require.Equal(t, want, created["history"])
	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, want, got["history"])
	var stored, storedFailed int
	require.NoError(t, env.pool.QueryRow(context.Background(),
		`SELECT history_retention_seconds, history_failed_retention_seconds FROM ax.job WHERE id = $1`, id).
		Scan(&stored, &storedFailed))
	require.Equal(t, []int{86400, 34560000}, []int{stored, storedFailed})

	delete(got, "history")
	updated := env.call("PUT", "/v1/jobs/"+id, env.admin, got).must(t, http.StatusOK)
	require.Nil(t, updated["history"], "without history the server's retention applies")

	hist := env.call("GET", "/v1/history", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, float64(7*86400), hist["retention_seconds"])
	require.Equal(t, float64(30*86400), hist["failed_retention_seconds"])
	require.Equal(t, []any{}, hist["drops"])
}
