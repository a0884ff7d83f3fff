package openapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
)

// groupJob is intervalJob in group.
func groupJob(group, name string) map[string]any {
	j := intervalJob(name, 60)
	j["group"] = group
	return j
}

// setNames lists the sets GET /v1/declarations shows key, by name, with
// their versions.
func (e *apiEnv) setNames(t *testing.T, key string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, s := range e.call("GET", "/v1/declarations", key, nil).must(t, http.StatusOK)["sets"].([]any) {
		s := s.(map[string]any)
		out[s["managed_by"].(string)], _ = s["version"].(string)
	}
	return out
}

// TestDeclarationSetBelongsToItsGroups (issue 36 item 3): a submit key
// limited to teamA cannot declare teamB's set sdk:billing at version 99999
// (403 naming body.managed_by, not even forced or as a dry run): the set
// keeps its version and its job, and teamB's next declaration applies. A
// key limited to several groups changes a set when it holds all of the
// set's groups; a set an unrestricted key created belongs to unrestricted
// keys. GET /v1/declarations shows a limited key only the sets it may
// change; the admin sees all.
func TestDeclarationSetBelongsToItsGroups(t *testing.T) {
	t.Parallel()
	env := setup(t)
	teamA := env.limitedKey(queue.KeyLimits{Groups: []string{"teamA"}}, openapi.ScopeSubmit)
	teamB := env.limitedKey(queue.KeyLimits{Groups: []string{"teamB"}}, openapi.ScopeSubmit)
	both := env.limitedKey(queue.KeyLimits{Groups: []string{"teamA", "teamB"}}, openapi.ScopeSubmit)

	env.call("POST", "/v1/declarations", teamB,
		declaration("sdk:billing", "1", true, groupJob("teamB", "invoice"))).must(t, http.StatusOK)

	// The attack: prune everything at a huge version, plain, forced, dry.
	attack := declaration("sdk:billing", "99999", true)
	for _, mutate := range []func(map[string]any){
		func(map[string]any) {},
		func(d map[string]any) { d["force"] = true },
		func(d map[string]any) { d["dry_run"] = true },
		func(d map[string]any) { d["jobs"] = []map[string]any{groupJob("teamA", "mine")} },
	} {
		d := map[string]any{}
		for k, v := range attack {
			d[k] = v
		}
		mutate(d)
		resp := env.call("POST", "/v1/declarations", teamA, d)
		resp.must(t, http.StatusForbidden)
		require.Equal(t, []string{"body.managed_by"}, resp.errorLocations())
	}
	require.Equal(t, "1", env.setNames(t, env.admin)["sdk:billing"], "the version is not bumped")
	sets := env.call("GET", "/v1/declarations", env.admin, nil).must(t, http.StatusOK)["sets"].([]any)
	require.Nil(t, sets[0].(map[string]any)["conflict"], "a refused key records nothing on the set")
	jobs := env.call("GET", "/v1/jobs?group=teamB", env.admin, nil).must(t, http.StatusOK)["jobs"].([]any)
	require.Len(t, jobs, 1)
	require.Equal(t, false, jobs[0].(map[string]any)["paused"])
	var count int
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM ax.job WHERE group_name = 'teamA'").Scan(&count))
	require.Zero(t, count, "nothing of the refused declarations was applied")

	// teamB's next declaration applies: no 409.
	report := env.call("POST", "/v1/declarations", teamB,
		declaration("sdk:billing", "2", true, groupJob("teamB", "invoice"), groupJob("teamB", "refund"))).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"invoice": "unchanged", "refund": "created"}, actions(t, report))

	// A key of both groups holds all of the set's groups.
	env.call("POST", "/v1/declarations", both,
		declaration("sdk:billing", "3", true, groupJob("teamB", "invoice"), groupJob("teamB", "refund"))).must(t, http.StatusOK)

	// Sets of teamA, of both teams, of the admin, and one not applied yet
	// that anyone may claim (it gets teamA's).
	env.call("POST", "/v1/declarations", teamA, declaration("sdk:reports", "1", true, groupJob("teamA", "daily"))).must(t, http.StatusOK)
	env.call("POST", "/v1/declarations", both,
		declaration("sdk:shared", "1", true, groupJob("teamA", "a"), groupJob("teamB", "b"))).must(t, http.StatusOK)
	env.call("POST", "/v1/declarations", env.admin, declaration("file:ops.yaml", "1", true, groupJob("teamB", "ops"))).must(t, http.StatusOK)
	env.call("POST", "/v1/declarations", teamA, declaration("sdk:empty", "1", true)).must(t, http.StatusOK)

	env.call("POST", "/v1/declarations", teamB,
		declaration("sdk:shared", "2", true, groupJob("teamB", "b"))).must(t, http.StatusForbidden)
	env.call("POST", "/v1/declarations", teamB,
		declaration("file:ops.yaml", "2", true, groupJob("teamB", "ops"))).must(t, http.StatusForbidden)
	env.call("POST", "/v1/declarations", teamB, declaration("sdk:empty", "2", true)).must(t, http.StatusForbidden)
	env.call("POST", "/v1/declarations", env.admin, declaration("sdk:shared", "2", true,
		groupJob("teamA", "a"), groupJob("teamB", "b"))).must(t, http.StatusOK)

	require.Equal(t, map[string]string{"sdk:reports": "1", "sdk:empty": "1"}, env.setNames(t, teamA))
	require.Equal(t, map[string]string{"sdk:billing": "3"}, env.setNames(t, teamB))
	require.Equal(t, map[string]string{"sdk:billing": "3", "sdk:reports": "1", "sdk:shared": "2", "sdk:empty": "1"},
		env.setNames(t, both))
	require.Equal(t, map[string]string{"sdk:billing": "3", "sdk:reports": "1", "sdk:shared": "2", "sdk:empty": "1",
		"file:ops.yaml": "1"}, env.setNames(t, env.admin))
}
