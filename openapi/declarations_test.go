package openapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
)

func declaration(managedBy, version string, prune bool, jobs ...map[string]any) map[string]any {
	if jobs == nil {
		jobs = []map[string]any{}
	}
	return map[string]any{"managed_by": managedBy, "version": version, "source": "declarations_test.go",
		"prune": prune, "jobs": jobs}
}

func intervalJob(name string, seconds int) map[string]any {
	return map[string]any{"name": name, "group": "decl", "trigger": map[string]any{"kind": "interval", "interval_seconds": seconds},
		"executor": map[string]any{"kind": "handler", "handler": name}, "params": json.RawMessage(`{"n": 12345678901234567890, "b": [1.50]}`)}
}

// actions maps each reported job's name to its action.
func actions(t *testing.T, report map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, j := range report["jobs"].([]any) {
		j := j.(map[string]any)
		out[j["name"].(string)] = j["action"].(string)
	}
	return out
}

// updatedAt reads the stored updated_at of every job, by name.
func (e *apiEnv) updatedAt() map[string]time.Time {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(), "SELECT name, updated_at FROM ax.job")
	require.NoError(e.t, err)
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var name string
		var at time.Time
		require.NoError(e.t, rows.Scan(&name, &at))
		out[name] = at
	}
	require.NoError(e.t, rows.Err())
	return out
}

func TestDeclarationCreatesUpdatesAndPauses(t *testing.T) {
	t.Parallel()
	env := setup(t)
	d := declaration("sdk:billing", "1", true, intervalJob("a", 60), intervalJob("b", 60), intervalJob("c", 60))
	report := env.call("POST", "/v1/declarations", env.admin, d).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"a": "created", "b": "created", "c": "created"}, actions(t, report))
	require.Equal(t, true, report["changed"])

	// The jobs show where they come from.
	id := report["jobs"].([]any)[0].(map[string]any)["id"].(string)
	job := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "sdk:billing", job["managed_by"])
	require.Equal(t, "1", job["declared_version"])
	require.Equal(t, "declarations_test.go", job["declared_in"])

	// Again, unchanged: nothing is written (no updated_at moves), the
	// params' big number included.
	before := env.updatedAt()
	report = env.call("POST", "/v1/declarations", env.admin, d).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"a": "unchanged", "b": "unchanged", "c": "unchanged"}, actions(t, report))
	require.Equal(t, false, report["changed"])
	require.Equal(t, before, env.updatedAt())

	// Version 2 changes b and leaves c out: b is updated (with its diff),
	// c paused with a reason, a untouched.
	d2 := declaration("sdk:billing", "2", true, intervalJob("a", 60), intervalJob("b", 30))
	report = env.call("POST", "/v1/declarations", env.admin, d2).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"a": "unchanged", "b": "updated", "c": "paused"}, actions(t, report))
	for _, j := range report["jobs"].([]any) {
		j := j.(map[string]any)
		switch j["name"] {
		case "b":
			require.Equal(t, []any{"trigger.interval_seconds: 60 → 30"}, j["changes"])
		case "c":
			require.Equal(t, float64(-1), j["index"])
			require.Equal(t, []any{"paused: false → true"}, j["changes"])
			require.Contains(t, j["reason"], "left out of declaration set sdk:billing at version 2")
		}
	}
	after := env.updatedAt()
	require.Equal(t, before["a"], after["a"])
	var paused bool
	var reason string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT t.paused, t.paused_reason FROM ax.trigger t JOIN ax.job j ON j.id = t.job_id WHERE j.name = 'c'").Scan(&paused, &reason))
	require.True(t, paused)
	require.Contains(t, reason, "version 2")

	// Version 1 again (an older build restarting): refused as a whole,
	// recorded on the set and counted; nothing changes.
	resp := env.call("POST", "/v1/declarations", env.admin, d)
	resp.must(t, http.StatusConflict)
	require.Equal(t, []string{"body.version"}, resp.errorLocations())
	require.Equal(t, after, env.updatedAt())
	sets := env.call("GET", "/v1/declarations", env.admin, nil).must(t, http.StatusOK)["sets"].([]any)
	require.Len(t, sets, 1)
	set := sets[0].(map[string]any)
	require.Equal(t, "2", set["version"])
	require.Equal(t, "1", set["conflict"].(map[string]any)["version"])

	// Version 3 declares c again: it is resumed.
	d3 := declaration("sdk:billing", "3", true, intervalJob("a", 60), intervalJob("b", 30), intervalJob("c", 60))
	report = env.call("POST", "/v1/declarations", env.admin, d3).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"a": "unchanged", "b": "unchanged", "c": "updated"}, actions(t, report))
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT t.paused FROM ax.trigger t JOIN ax.job j ON j.id = t.job_id WHERE j.name = 'c'").Scan(&paused))
	require.False(t, paused)
}

func TestDeclaredJobRefusesAPIChanges(t *testing.T) {
	t.Parallel()
	env := setup(t)
	a := intervalJob("a", 60)
	delete(a, "params") // the test sends back what it got, decoded into float64
	report := env.call("POST", "/v1/declarations", env.admin,
		declaration("file:jobs.yaml", "", false, a)).must(t, http.StatusOK)
	id := report["jobs"].([]any)[0].(map[string]any)["id"].(string)
	job := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)

	job["description"] = "edited"
	resp := env.call("PUT", "/v1/jobs/"+id, env.admin, job)
	problem := resp.must(t, http.StatusConflict)
	require.Contains(t, problem["detail"], "managed by file:jobs.yaml")
	require.Contains(t, problem["detail"], "declared in declarations_test.go")
	require.Equal(t, []string{"path.id"}, resp.errorLocations())

	patch := env.call("PATCH", "/v1/jobs/"+id, env.admin, `{"description": "patched"}`)
	patch.must(t, http.StatusConflict)
	env.call("DELETE", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusConflict)

	// Forced, the change is made and the job stays managed; the next
	// declaration puts the definition back.
	got := env.call("PUT", "/v1/jobs/"+id+"?force=true", env.admin, job).must(t, http.StatusOK)
	require.Equal(t, "edited", got["description"])
	require.Equal(t, "file:jobs.yaml", got["managed_by"])
	got = env.call("PATCH", "/v1/jobs/"+id+"?force=true", env.admin, `{"description": "patched"}`).must(t, http.StatusOK)
	require.Equal(t, "patched", got["description"])
	report = env.call("POST", "/v1/declarations", env.admin,
		declaration("file:jobs.yaml", "", false, a)).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"a": "updated"}, actions(t, report))
	require.Equal(t, []any{`- description: "patched"`}, report["jobs"].([]any)[0].(map[string]any)["changes"])

	// Pause and resume are operations, not edits: allowed.
	env.call("POST", "/v1/jobs/"+id+"/pause", env.admin, nil).must(t, http.StatusOK)
	env.call("DELETE", "/v1/jobs/"+id+"?force=true", env.admin, nil).must(t, http.StatusNoContent)
}

func TestDeclarationConflictsAndValidation(t *testing.T) {
	t.Parallel()
	env := setup(t)
	env.call("POST", "/v1/declarations", env.admin,
		declaration("sdk:one", "1", true, intervalJob("shared", 60))).must(t, http.StatusOK)

	// Another set may not take the job over unless forced.
	other := declaration("sdk:two", "1", true, intervalJob("mine", 60), intervalJob("shared", 30))
	resp := env.call("POST", "/v1/declarations", env.admin, other)
	resp.must(t, http.StatusConflict)
	require.Equal(t, []string{"body.jobs[1].name"}, resp.errorLocations())
	require.Equal(t, 1, env.countJobs(), "nothing of a refused declaration is applied")
	other["force"] = true
	report := env.call("POST", "/v1/declarations", env.admin, other).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"mine": "created", "shared": "updated"}, actions(t, report))

	// Each job is validated as POST /v1/jobs validates it, named by index.
	bad := intervalJob("bad", 60)
	bad["trigger"] = map[string]any{"kind": "cron", "cron": "0 0 30 2 *"}
	resp = env.call("POST", "/v1/declarations", env.admin, declaration("sdk:three", "", false, intervalJob("ok", 1), bad))
	resp.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.jobs[1].trigger.cron"}, resp.errorLocations())

	// A job declared twice, and an unknown rate class, name their job.
	resp = env.call("POST", "/v1/declarations", env.admin, declaration("sdk:three", "", false, intervalJob("x", 1), intervalJob("x", 2)))
	resp.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.jobs[1].name"}, resp.errorLocations())
	classless := intervalJob("y", 1)
	classless["rate_limit_class"] = "nope"
	resp = env.call("POST", "/v1/declarations", env.admin, declaration("sdk:three", "", false, intervalJob("x", 1), classless))
	resp.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.jobs[1].rate_limit_class"}, resp.errorLocations())
	require.Equal(t, 2, env.countJobs())

	// A dry run reports and writes nothing.
	dry := declaration("sdk:three", "", false, intervalJob("x", 1))
	dry["dry_run"] = true
	report = env.call("POST", "/v1/declarations", env.admin, dry).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"x": "created"}, actions(t, report))
	require.Equal(t, 2, env.countJobs())

	// More than 1,000 jobs are refused before any work.
	many := make([]map[string]any, 1001)
	for i := range many {
		many[i] = map[string]any{"name": "n", "trigger": map[string]any{"kind": "manual"}, "executor": map[string]any{"kind": "handler", "handler": "h"}}
	}
	resp = env.call("POST", "/v1/declarations", env.admin, declaration("sdk:many", "", false, many...))
	resp.must(t, http.StatusUnprocessableEntity)
	require.Contains(t, resp.errorLocations(), "body.jobs")

	// A read key may list sets, not declare.
	read := env.key(openapi.ScopeRead)
	env.call("POST", "/v1/declarations", read, dry).must(t, http.StatusForbidden)
	env.call("GET", "/v1/declarations", read, nil).must(t, http.StatusOK)
}
