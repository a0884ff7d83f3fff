package openapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/schedule"
)

// TestBackfillAPI: bad ranges and jobs are refused naming the field and
// store nothing; a backfill is created once per Idempotency-Key, shows its
// progress, marks its runs (backfill_id, explain), and stops on cancel.
func TestBackfillAPI(t *testing.T) {
	t.Parallel()
	env := setup(t)
	ctx := context.Background()
	jobID := env.call("POST", "/v1/jobs", env.admin, cronJob("nightly", "0 30 1 * * ?", "Europe/London")).
		must(t, http.StatusCreated)["id"].(string)
	manual := env.manualJob("by-hand", nil)
	path := "/v1/jobs/" + jobID + "/backfill"
	from := time.Date(2026, 10, 10, 0, 0, 0, 0, time.UTC)
	to := from.AddDate(0, 0, 30)
	countBackfills := func() int {
		var n int
		require.NoError(t, env.pool.QueryRow(ctx, "SELECT count(*) FROM ax.backfill").Scan(&n))
		return n
	}

	for name, c := range map[string]struct {
		path     string
		body     any
		location string
	}{
		"to in the future": {path, map[string]any{"from": from, "to": time.Now().Add(time.Hour)}, "body.to"},
		"to before from":   {path, map[string]any{"from": to, "to": from}, "body.to"},
		"year far away":    {path, map[string]any{"from": "1970-01-01T00:00:00Z", "to": to}, "body.from"},
		"too concurrent":   {path, map[string]any{"from": from, "to": to, "max_concurrent": 5000}, "body.max_concurrent"},
		"unknown overlap":  {path, map[string]any{"from": from, "to": to, "overlap": "sometimes"}, "body.overlap"},
		"not a cron job":   {"/v1/jobs/" + manual + "/backfill", map[string]any{"from": from, "to": to}, "path.id"},
	} {
		resp := env.call("POST", c.path, env.admin, c.body)
		resp.must(t, http.StatusUnprocessableEntity)
		require.Contains(t, resp.errorLocations(), c.location, name)
	}
	require.Zero(t, countBackfills(), "bad input stores nothing")

	create := func() map[string]any {
		req, err := env.request("POST", path, env.admin, map[string]any{"from": from, "to": to, "max_concurrent": 2})
		require.NoError(t, err)
		req.Header.Set("Idempotency-Key", "october")
		resp := env.do(req)
		body := resp.must(t, http.StatusAccepted)
		require.Equal(t, "/v1/backfills/"+body["id"].(string), resp.header.Get("Location"))
		return body
	}
	b := create()
	require.Equal(t, b["id"], create()["id"], "a retried create is the same backfill")
	require.Equal(t, 1, countBackfills())
	require.EqualValues(t, 30, b["ticks"].(map[string]any)["total"])
	require.Equal(t, "running", b["state"])

	releaser := schedule.NewBackfillReleaser(env.pool, nil, schedule.BackfillReleaserConfig{})
	n, err := releaser.ReleaseDue(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	got := env.call("GET", "/v1/backfills/"+b["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.EqualValues(t, 2, got["ticks"].(map[string]any)["created"])
	require.EqualValues(t, 2, got["runs"].(map[string]any)["unfinished"])

	// The first night's run says where it came from.
	first := time.Date(2026, 10, 10, 0, 30, 0, 0, time.UTC) // 01:30 BST
	runs := env.call("GET", "/v1/jobs/"+jobID+"/executions", env.admin, nil).must(t, http.StatusOK)["executions"].([]any)
	require.Len(t, runs, 2)
	var runID string
	for _, r := range runs {
		r := r.(map[string]any)
		require.Equal(t, "backfill", r["cause"])
		if r["scheduled_for"] == first.Format(time.RFC3339) {
			runID = r["id"].(string)
		}
	}
	require.NotEmpty(t, runID)
	run := env.call("GET", "/v1/executions/"+runID, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, b["id"], run["backfill_id"])
	x := env.explain(t, jobID, first.Format(time.RFC3339))
	require.Equal(t, "fired", x["verdict"])
	require.Contains(t, x["reason"], "backfilled")
	require.Contains(t, x["reason"], b["id"])

	listed := env.call("GET", "/v1/jobs/"+jobID+"/backfills", env.admin, nil).must(t, http.StatusOK)
	require.Len(t, listed["backfills"], 1)

	// Cancel stops it: its unfinished runs are cancelled, nothing more is released.
	cancelled := env.call("POST", "/v1/backfills/"+b["id"].(string)+"/cancel", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "cancelled", cancelled["state"])
	require.EqualValues(t, 0, cancelled["runs"].(map[string]any)["unfinished"])
	require.EqualValues(t, 2, cancelled["runs"].(map[string]any)["failed"])
	n, err = releaser.ReleaseDue(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	env.call("GET", "/v1/backfills/01a24212-4c0a-7621-8842-d09f65601c41", env.admin, nil).must(t, http.StatusNotFound)
}
