package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestCreateCronJobComputesNextFire(t *testing.T) {
	t.Parallel()
	env := setup(t)
	resp := env.call("POST", "/v1/jobs", env.admin, cronJob("breakfast", "0 0 8 * * ?", "Asia/Shanghai"))
	job := resp.must(t, http.StatusCreated)
	require.Equal(t, "/v1/jobs/"+job["id"].(string), resp.header.Get("Location"))

	// 08:00 in Shanghai (UTC+8, no DST) is 00:00 UTC: the next midnight
	// UTC after the database's now.
	var now time.Time
	require.NoError(t, env.pool.QueryRow(context.Background(), "SELECT now()").Scan(&now))
	want := now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour)
	require.Equal(t, want.Format(time.RFC3339), job["next_fire_at"])

	got := env.call("GET", "/v1/jobs/"+job["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, job["next_fire_at"], got["next_fire_at"])
	require.Equal(t, "default", got["group"])
	require.Equal(t, false, got["paused"])
	require.Equal(t, map[string]any{"kind": "cron", "cron": "0 0 8 * * ?", "timezone": "Asia/Shanghai"}, got["trigger"])
	// Defaults are spelled out.
	require.Equal(t, float64(3600), got["timeout_seconds"])
	require.Equal(t, map[string]any{"max_attempts": float64(4), "backoff_seconds": float64(5), "backoff_max_seconds": float64(600)}, got["retry"])
	require.Equal(t, "fire_once", got["misfire"].(map[string]any)["policy"])

	var stored time.Time
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT next_fire_at FROM ax.trigger WHERE job_id = $1", job["id"]).Scan(&stored))
	require.True(t, want.Equal(stored))
}

func TestTriggerKinds(t *testing.T) {
	t.Parallel()
	env := setup(t)
	var now time.Time
	require.NoError(t, env.pool.QueryRow(context.Background(), "SELECT now()").Scan(&now))
	runAt := now.Add(time.Hour).UTC().Truncate(time.Second)

	interval := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "every-30s", "trigger": map[string]any{"kind": "interval", "interval_seconds": 30},
		"executor": map[string]any{"kind": "http", "url": "http://127.0.0.1:9/hook"},
	}).must(t, http.StatusCreated)
	next, err := time.Parse(time.RFC3339Nano, interval["next_fire_at"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, now.Add(30*time.Second), next, 5*time.Second)
	require.Equal(t, "POST", interval["executor"].(map[string]any)["method"])

	delay := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "once", "trigger": map[string]any{"kind": "delay", "run_at": runAt},
		"executor": map[string]any{"kind": "handler", "handler": "reports.nightly"},
	}).must(t, http.StatusCreated)
	require.Equal(t, runAt.Format(time.RFC3339), delay["next_fire_at"])

	manual := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "by-hand", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"},
	}).must(t, http.StatusCreated)
	require.Nil(t, manual["next_fire_at"], "manual jobs never fire on their own")
}

func TestUpdateKeepsOrRecomputesNextFire(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := env.call("POST", "/v1/jobs", env.admin, cronJob("nightly", "0 0 3 * * *", "UTC")).must(t, http.StatusCreated)
	id := job["id"].(string)

	// Changing the description leaves the schedule alone.
	var storedBefore time.Time
	require.NoError(t, env.pool.QueryRow(context.Background(), "SELECT next_fire_at FROM ax.trigger WHERE job_id = $1", id).Scan(&storedBefore))
	_, err := env.pool.Exec(context.Background(), "UPDATE ax.trigger SET next_fire_at = next_fire_at - interval '1 hour' WHERE job_id = $1", id)
	require.NoError(t, err)
	job["description"] = "rebuilds the nightly report"
	updated := env.call("PUT", "/v1/jobs/"+id, env.admin, job).must(t, http.StatusOK)
	require.Equal(t, "rebuilds the nightly report", updated["description"])
	require.Equal(t, storedBefore.Add(-time.Hour).UTC().Format(time.RFC3339), updated["next_fire_at"])

	// Changing the cron recomputes it.
	job["trigger"] = map[string]any{"kind": "cron", "cron": "0 30 4 * * *", "timezone": "UTC"}
	updated = env.call("PUT", "/v1/jobs/"+id, env.admin, job).must(t, http.StatusOK)
	next, err := time.Parse(time.RFC3339, updated["next_fire_at"].(string))
	require.NoError(t, err)
	require.Equal(t, 4, next.Hour())
	require.Equal(t, 30, next.Minute())

	// A merge patch changes one field and keeps the rest.
	req, err := http.NewRequest("PATCH", env.url+"/v1/jobs/"+id, stringsReader(`{"owner":"team-reports","priority":7}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	req.Header.Set("Authorization", "Bearer "+env.admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "team-reports", got["owner"])
	require.Equal(t, float64(7), got["priority"])
	require.Equal(t, "rebuilds the nightly report", got["description"])
	require.Equal(t, updated["next_fire_at"], got["next_fire_at"])
}

func TestPauseResumeDelete(t *testing.T) {
	t.Parallel()
	env := setup(t)
	id := env.call("POST", "/v1/jobs", env.admin, cronJob("p", "*/5 * * * *", "UTC")).must(t, http.StatusCreated)["id"].(string)

	paused := env.call("POST", "/v1/jobs/"+id+"/pause", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, true, paused["paused"])
	require.NotNil(t, paused["paused_at"])
	require.NotNil(t, paused["next_fire_at"], "pausing keeps the schedule so missed fires can be accounted for")
	env.call("POST", "/v1/jobs/"+id+"/pause", env.admin, nil).must(t, http.StatusOK)

	list := env.call("GET", "/v1/jobs?paused=true", env.admin, nil).must(t, http.StatusOK)
	require.Len(t, list["jobs"], 1)
	list = env.call("GET", "/v1/jobs?paused=false", env.admin, nil).must(t, http.StatusOK)
	require.Empty(t, list["jobs"])

	resumed := env.call("POST", "/v1/jobs/"+id+"/resume", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, false, resumed["paused"])
	require.Nil(t, resumed["paused_at"])

	env.call("DELETE", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusNoContent)
	env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusNotFound)
	env.call("DELETE", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusNotFound)
	env.call("POST", "/v1/jobs/"+id+"/pause", env.admin, nil).must(t, http.StatusNotFound)
}

func TestListFiltersAndPages(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for i := range 7 {
		body := cronJob(fmt.Sprintf("job-%d", i), "0 * * * *", "UTC")
		body["group"] = []string{"a", "b"}[i%2]
		body["owner"] = "owner-" + []string{"x", "y", "z"}[i%3]
		env.call("POST", "/v1/jobs", env.admin, body).must(t, http.StatusCreated)
	}
	var names []string
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		page := env.call("GET", "/v1/jobs?limit=3"+cursor, env.admin, nil).must(t, http.StatusOK)
		for _, j := range page["jobs"].([]any) {
			names = append(names, j.(map[string]any)["name"].(string))
		}
		next, ok := page["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = "&cursor=" + next
	}
	require.Equal(t, []string{"job-0", "job-1", "job-2", "job-3", "job-4", "job-5", "job-6"}, names, "creation order, no gaps or repeats")

	groupA := env.call("GET", "/v1/jobs?group=a", env.admin, nil).must(t, http.StatusOK)
	require.Len(t, groupA["jobs"], 4)
	ownerX := env.call("GET", "/v1/jobs?owner=owner-x&group=a", env.admin, nil).must(t, http.StatusOK)
	require.Len(t, ownerX["jobs"], 2) // job-0 and job-6

	bad := env.call("GET", "/v1/jobs?cursor=%21%21", env.admin, nil)
	bad.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"query.cursor"}, bad.errorLocations())
	env.call("GET", "/v1/jobs?limit=0", env.admin, nil).must(t, http.StatusUnprocessableEntity)
	env.call("GET", "/v1/jobs?colour=red", env.admin, nil).must(t, http.StatusUnprocessableEntity)
}

func TestDuplicateNameConflicts(t *testing.T) {
	t.Parallel()
	env := setup(t)
	env.call("POST", "/v1/jobs", env.admin, cronJob("same", "0 * * * *", "UTC")).must(t, http.StatusCreated)
	resp := env.call("POST", "/v1/jobs", env.admin, cronJob("same", "0 * * * *", "UTC"))
	resp.must(t, http.StatusConflict)
	require.Equal(t, []string{"body.name"}, resp.errorLocations())
	other := cronJob("same", "0 * * * *", "UTC")
	other["group"] = "elsewhere"
	env.call("POST", "/v1/jobs", env.admin, other).must(t, http.StatusCreated)
	require.Equal(t, 2, env.countJobs())
}

func TestAuth(t *testing.T) {
	t.Parallel()
	env := setup(t)
	body := cronJob("secured", "0 * * * *", "UTC")

	noKey := env.call("POST", "/v1/jobs", "", body)
	noKey.must(t, http.StatusUnauthorized)
	require.Equal(t, "application/problem+json", noKey.header.Get("Content-Type"))
	require.Contains(t, noKey.header.Get("WWW-Authenticate"), "Bearer")
	env.call("GET", "/v1/jobs", "ax_not-a-real-key-at-all", nil).must(t, http.StatusUnauthorized)

	read := env.key("read")
	env.call("GET", "/v1/jobs", read, nil).must(t, http.StatusOK)
	forbidden := env.call("POST", "/v1/jobs", read, body)
	forbidden.must(t, http.StatusForbidden)
	require.Contains(t, forbidden.body["detail"], "lacks scope submit")

	submit := env.key("submit")
	env.call("POST", "/v1/jobs", submit, body).must(t, http.StatusCreated)
	env.call("GET", "/v1/jobs", submit, nil).must(t, http.StatusOK) // submit may read

	agent := env.key("agent")
	env.call("GET", "/v1/jobs", agent, nil).must(t, http.StatusForbidden)
	require.Equal(t, 1, env.countJobs())

	// A revoked key stops working, within the 2 s that replicas trust an
	// authenticated key without reading it again.
	_, err := env.pool.Exec(context.Background(), "UPDATE ax.api_key SET revoked_at = now()")
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return env.call("GET", "/v1/jobs", read, nil).status == http.StatusUnauthorized
	}, 3*time.Second, 100*time.Millisecond)

	// Probes need no key.
	env.call("GET", "/healthz", "", nil).must(t, http.StatusOK)
	env.call("GET", "/readyz", "", nil).must(t, http.StatusOK)
}
