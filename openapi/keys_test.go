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

// GET /v1/keys is paged, oldest first: following next_cursor lists every
// key once; a cursor that is not one, or whose key was deleted since (an
// agent's token pruned with its agent), is refused naming query.cursor.
func TestKeyListPages(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for _, name := range []string{"k1", "k2", "k3", "k4", "k5"} {
		env.call("POST", "/v1/keys", env.admin, map[string]any{"name": name, "scopes": []string{"read"}}).
			must(t, http.StatusCreated)
	}
	var want []string
	rows, err := env.pool.Query(t.Context(), "SELECT id::text FROM ax.api_key ORDER BY created_at, id")
	require.NoError(t, err)
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		want = append(want, id)
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqual(t, len(want), 6, "the admin key and five more")

	var got []string
	var cursors []string
	path := "/v1/keys?limit=2"
	for range len(want) {
		page := env.call("GET", path, env.admin, nil).must(t, http.StatusOK)
		keys := page["keys"].([]any)
		require.LessOrEqual(t, len(keys), 2)
		for _, k := range keys {
			got = append(got, k.(map[string]any)["id"].(string))
		}
		next, _ := page["next_cursor"].(string)
		if next == "" {
			break
		}
		cursors = append(cursors, next)
		path = "/v1/keys?limit=2&cursor=" + next
	}
	require.Equal(t, want, got, "every key once, oldest first")

	r := env.call("GET", "/v1/keys?cursor=bm90LWEtY3Vyc29y", env.admin, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Contains(t, r.errorLocations(), "query.cursor", string(r.raw))

	// The last full page's last key (one of the five: the admin key is
	// the oldest) deleted: its cursor names no key now.
	last := len(cursors) - 1
	_, err = env.pool.Exec(t.Context(), "DELETE FROM ax.api_key WHERE id = $1", got[2*last+1])
	require.NoError(t, err)
	r = env.call("GET", "/v1/keys?limit=2&cursor="+cursors[last], env.admin, nil)
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Contains(t, r.errorLocations(), "query.cursor", string(r.raw))
	env.call("GET", "/v1/keys?limit=1001", env.admin, nil).must(t, http.StatusUnprocessableEntity)
}
