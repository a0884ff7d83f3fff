package openapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
)

// TestRateClassKeptToGroups: a class kept to group billing is named by
// billing's jobs only, whoever writes them, so no other team's jobs take
// its tokens; a key limited to groups names no class open to every group
// (job, run or declaration); a class's groups cannot leave out the group
// of a job that names it. Each refusal names the field and changes
// nothing.
func TestRateClassKeptToGroups(t *testing.T) {
	t.Parallel()
	env := setup(t)
	limited := env.limitedKey(queue.KeyLimits{Groups: []string{"billing"}}, openapi.ScopeSubmit)
	env.call("POST", "/v1/classes", env.admin, map[string]any{"name": "billing-db", "rate": 10, "burst": 10,
		"groups": []string{"billing"}}).must(t, http.StatusCreated)
	env.call("POST", "/v1/classes", env.admin, map[string]any{"name": "shared-api", "rate": 10, "burst": 10}).
		must(t, http.StatusCreated)
	r := env.call("POST", "/v1/classes", env.admin, map[string]any{"name": "bad", "rate": 10, "burst": 10,
		"groups": []string{"billing", ""}})
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.groups[1]"}, r.errorLocations(), string(r.raw))
	got := env.call("GET", "/v1/classes/billing-db", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, []any{"billing"}, got["groups"])

	jobIn := func(key, name, group, class string) *response {
		job := cronJob(name, "0 0 * * *", "UTC")
		job["trigger"] = map[string]any{"kind": "manual"}
		job["group"], job["rate_limit_class"] = group, class
		return env.call("POST", "/v1/jobs", key, job)
	}

	// Another team's job, even written with an admin key.
	r = jobIn(env.admin, "pay", "payments", "billing-db")
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.rate_limit_class"}, r.errorLocations(), string(r.raw))
	// A limited key and a class open to every group.
	r = jobIn(limited, "bill-shared", "billing", "shared-api")
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.rate_limit_class"}, r.errorLocations(), string(r.raw))
	r = env.call("POST", "/v1/runs", limited, map[string]any{"group": "billing", "rate_limit_class": "shared-api",
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.rate_limit_class"}, r.errorLocations(), string(r.raw))
	decl := cronJob("declared", "0 0 * * *", "UTC")
	decl["group"], decl["rate_limit_class"] = "billing", "shared-api"
	r = env.call("POST", "/v1/declarations", limited, map[string]any{"managed_by": "billing-app", "version": "1",
		"jobs": []any{decl}})
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.jobs[0].rate_limit_class"}, r.errorLocations(), string(r.raw))
	require.Zero(t, env.countJobs(), "a refused job is not written")

	// Billing's own jobs, whoever writes them; the admin's in any group
	// with the open class.
	billing := jobIn(limited, "bill", "billing", "billing-db").must(t, http.StatusCreated)["id"].(string)
	jobIn(env.admin, "bill-too", "billing", "billing-db").must(t, http.StatusCreated)
	shared := jobIn(env.admin, "bill-shared-old", "billing", "shared-api").must(t, http.StatusCreated)
	jobIn(env.admin, "pay-shared", "payments", "shared-api").must(t, http.StatusCreated)
	// A limited key may still edit its group's job that names the open
	// class already (a job from before classes had groups); naming it anew
	// is refused.
	shared["owner"] = "team-billing"
	env.call("PUT", "/v1/jobs/"+shared["id"].(string), limited, shared).must(t, http.StatusOK)
	bill := env.call("GET", "/v1/jobs/"+billing, env.admin, nil).must(t, http.StatusOK)
	bill["rate_limit_class"] = "shared-api"
	r = env.call("PUT", "/v1/jobs/"+billing, limited, bill)
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.rate_limit_class"}, r.errorLocations(), string(r.raw))

	// Moving billing's job to another group, or the class away from
	// billing, is refused while the job names it.
	job := env.call("GET", "/v1/jobs/"+billing, env.admin, nil).must(t, http.StatusOK)
	job["group"] = "payments"
	r = env.call("PUT", "/v1/jobs/"+billing, env.admin, job)
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.rate_limit_class"}, r.errorLocations(), string(r.raw))
	r = env.call("PUT", "/v1/classes/billing-db", env.admin, map[string]any{"name": "billing-db", "rate": 10, "burst": 10,
		"groups": []string{"payments"}})
	r.must(t, http.StatusConflict)
	require.Equal(t, []string{"body.groups"}, r.errorLocations(), string(r.raw))
	got = env.call("GET", "/v1/classes/billing-db", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, []any{"billing"}, got["groups"], "a refused change changes nothing")
	env.call("PUT", "/v1/classes/billing-db", env.admin, map[string]any{"name": "billing-db", "rate": 10, "burst": 10,
		"groups": []string{"billing", "payments"}}).must(t, http.StatusOK)
}
