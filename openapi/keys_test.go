package openapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Keys are managed over the API by admin keys alone: a new key works at
// once, its secret is shown once, a revoked key stops working, and bad
// limits are refused naming the field without storing a key.
func TestKeyAPI(t *testing.T) {
	t.Parallel()
	env := setup(t)
	var before int
	require.NoError(t, env.pool.QueryRow(t.Context(), "SELECT count(*) FROM ax.api_key").Scan(&before))

	created := env.call("POST", "/v1/keys", env.admin, map[string]any{"name": "dashboard", "scopes": []string{"read"}}).
		must(t, http.StatusCreated)
	secret := created["secret"].(string)
	require.Equal(t, "dashboard", created["name"])
	require.Equal(t, secret[:len(created["prefix"].(string))], created["prefix"])
	env.call("GET", "/v1/jobs", secret, nil).must(t, http.StatusOK)
	env.call("GET", "/v1/keys", secret, nil).must(t, http.StatusForbidden)
	env.call("POST", "/v1/keys", secret, map[string]any{"scopes": []string{"admin"}}).must(t, http.StatusForbidden)

	list := env.call("GET", "/v1/keys", env.admin, nil).must(t, http.StatusOK)["keys"].([]any)
	require.Len(t, list, before+1)
	last := list[len(list)-1].(map[string]any)
	require.Equal(t, created["id"], last["id"])
	require.NotContains(t, last, "secret")

	signing := env.call("POST", "/v1/keys/"+created["id"].(string)+"/signing-keys", env.admin, nil).must(t, http.StatusCreated)
	require.Equal(t, created["id"], signing["api_key_id"])
	require.NotEmpty(t, signing["secret"])
	env.call("POST", "/v1/keys/0190a1b2-0000-7000-8000-000000000000/signing-keys", env.admin, nil).must(t, http.StatusNotFound)

	env.call("POST", "/v1/keys/"+created["id"].(string)+"/revoke", env.admin, nil).must(t, http.StatusNoContent)
	env.call("GET", "/v1/jobs", secret, nil).must(t, http.StatusUnauthorized)
	env.call("POST", "/v1/keys/"+created["id"].(string)+"/revoke", env.admin, nil).must(t, http.StatusNotFound)

	for _, c := range []struct {
		body map[string]any
		loc  string
	}{
		{map[string]any{"scopes": []string{"admin"}, "groups": []string{"billing"}}, "body.groups"},
		{map[string]any{"scopes": []string{"read"}, "labels": map[string]any{"pool": []string{"gpu"}}}, "body.labels"},
		{map[string]any{"scopes": []string{"root"}}, "body.scopes[0]"},
		{map[string]any{"scopes": []string{}}, "body.scopes"},
	} {
		r := env.call("POST", "/v1/keys", env.admin, c.body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%v: %s", c.body, r.raw)
		require.Contains(t, r.errorLocations(), c.loc, string(r.raw))
	}
	var after int
	require.NoError(t, env.pool.QueryRow(t.Context(), "SELECT count(*) FROM ax.api_key").Scan(&after))
	require.Equal(t, before+1, after, "refused keys store nothing")
}

// list-jobs filters by name: what the CLI resolves group/name with.
func TestListJobsByName(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for _, group := range []string{"a", "b"} {
		job := cronJob("nightly", "0 0 3 * * *", "UTC")
		job["group"] = group
		env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)
	}
	env.call("POST", "/v1/jobs", env.admin, cronJob("other", "0 0 3 * * *", "UTC")).must(t, http.StatusCreated)
	jobs := env.call("GET", "/v1/jobs?name=nightly", env.admin, nil).must(t, http.StatusOK)["jobs"].([]any)
	require.Len(t, jobs, 2)
	jobs = env.call("GET", "/v1/jobs?name=nightly&group=b", env.admin, nil).must(t, http.StatusOK)["jobs"].([]any)
	require.Len(t, jobs, 1)
	require.Equal(t, "b", jobs[0].(map[string]any)["group"])
}
