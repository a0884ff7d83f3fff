package openapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/schedule"
)

// TestJobActiveWindowAndJitterRoundTrip: the window and the jitter are
// stored as sent, shown back, and the first fire is the window's first
// tick; a job PUT back as it was shown keeps them.
func TestJobActiveWindowAndJitterRoundTrip(t *testing.T) {
	t.Parallel()
	env := setup(t)
	from := time.Now().UTC().Truncate(time.Hour).Add(48 * time.Hour)
	until := from.Add(24 * time.Hour)
	created := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "windowed", "trigger": map[string]any{"kind": "cron", "cron": "0 0 * * * *"},
		"executor":    map[string]any{"kind": "shell", "command": "true"},
		"active_from": from.Format(time.RFC3339), "active_until": until.Format(time.RFC3339), "jitter_seconds": 90,
	}).must(t, http.StatusCreated)
	require.Equal(t, from.Format(time.RFC3339), created["active_from"])
	require.Equal(t, until.Format(time.RFC3339), created["active_until"])
	require.Equal(t, float64(90), created["jitter_seconds"])
	require.Equal(t, from.Format(time.RFC3339), created["next_fire_at"], "the first tick in the window")

	id := created["id"].(string)
	delete(created, "signing_secret")
	env.call("PUT", "/v1/jobs/"+id, env.admin, created).must(t, http.StatusOK)
	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, created["active_until"], got["active_until"])
	require.Equal(t, float64(90), got["jitter_seconds"])

	// A window holding no tick of the hourly cron leaves no next fire.
	got["active_from"] = from.Add(-2*time.Hour + time.Minute).Format(time.RFC3339)
	got["active_until"] = from.Add(-time.Hour - time.Minute).Format(time.RFC3339)
	updated := env.call("PUT", "/v1/jobs/"+id, env.admin, got).must(t, http.StatusOK)
	require.Nil(t, updated["next_fire_at"])
}

// TestCronPreviewShowsJitter: with a job id and its jitter, the preview
// shows each tick's start as the job's runs will have it (the same on
// every call), within [tick, tick + jitter); a jitter without a job is a
// 422 naming job_id.
func TestCronPreviewShowsJitter(t *testing.T) {
	t.Parallel()
	env := setup(t)
	const jobID = "0190f5a2-7b3c-7d4e-8f10-112233445566"
	body := map[string]any{"cron": "0 0 12 LW * ?", "count": 3, "after": "2027-12-01T00:00:00Z",
		"job_id": jobID, "jitter_seconds": 600}
	first := env.call("POST", "/v1/cron/preview", env.admin, body).must(t, http.StatusOK)
	again := env.call("POST", "/v1/cron/preview", env.admin, body).must(t, http.StatusOK)
	require.Equal(t, first["fires"], again["fires"])
	fires := first["fires"].([]any)
	require.Len(t, fires, 3)
	wantTicks := []string{"2027-12-31T12:00:00Z", "2028-01-31T12:00:00Z", "2028-02-29T12:00:00Z"}
	for i, f := range fires {
		fire := f.(map[string]any)
		require.Equal(t, wantTicks[i], fire["utc"])
		tick, err := time.Parse(time.RFC3339, fire["utc"].(string))
		require.NoError(t, err)
		start, err := time.Parse(time.RFC3339Nano, fire["starts_at"].(string))
		require.NoError(t, err)
		require.Equal(t, schedule.JitterOffset(uuid.MustParse(jobID), tick, 600), start.Sub(tick))
		require.True(t, !start.Before(tick) && start.Before(tick.Add(600*time.Second)), start)
	}

	delete(body, "job_id")
	resp := env.call("POST", "/v1/cron/preview", env.admin, body)
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s", resp.raw)
	require.Contains(t, resp.errorLocations(), "body.job_id")
}
