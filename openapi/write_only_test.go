package openapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// Secrets of an HTTP job: header values and URL credentials (userinfo is
// refused on save already).
var jobSecrets = []string{"s3cret-header", "s3cret-sig", "s3cret-token"}

func secretHTTPJob(name string) map[string]any {
	return map[string]any{
		"name":    name,
		"trigger": map[string]any{"kind": "interval", "interval_seconds": 3600},
		"executor": map[string]any{"kind": "http", "url": "https://127.0.0.1:9/run?sig=s3cret-sig&day=1",
			"headers": map[string]string{"Authorization": "Bearer s3cret-header", "X-Team": "billing"}},
		"callback": map[string]any{"url": "https://127.0.0.1:9/hook?token=s3cret-token"},
	}
}

// storedSecrets is what the database holds of the job's write-only values.
func (e *apiEnv) storedSecrets(id string) (auth, url, callback string) {
	e.t.Helper()
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		`SELECT executor->'headers'->>'Authorization', executor->>'url', callback_url FROM ax.job WHERE id = $1`, id).
		Scan(&auth, &url, &callback))
	return auth, url, callback
}

func requireNoSecret(t *testing.T, raw []byte) {
	t.Helper()
	for _, s := range jobSecrets {
		require.NotContains(t, string(raw), s)
	}
}

// No key reads a job's header values or URL credentials (GET, list,
// create's answer): they show as "ax-redacted", names, hosts and paths
// kept. What GET showed, PUT back or patched, keeps the stored values; a
// placeholder with no stored value is refused, naming the field.
func TestWriteOnlyJobSecrets(t *testing.T) {
	t.Parallel()
	env := setup(t)
	created := env.call("POST", "/v1/jobs", env.admin, secretHTTPJob("secret")).must(t, http.StatusCreated)
	id := created["id"].(string)
	requireNoSecret(t, env.call("POST", "/v1/jobs", env.admin, secretHTTPJob("secret2")).raw)

	read := env.key("read")
	got := env.call("GET", "/v1/jobs/"+id, read, nil)
	job := got.must(t, http.StatusOK)
	requireNoSecret(t, got.raw)
	exec := job["executor"].(map[string]any)
	require.Equal(t, map[string]any{"Authorization": "ax-redacted", "X-Team": "ax-redacted"}, exec["headers"])
	require.Equal(t, "https://127.0.0.1:9/run?sig=ax-redacted&day=ax-redacted", exec["url"])
	require.Equal(t, "https://127.0.0.1:9/hook?token=ax-redacted", job["callback"].(map[string]any)["url"])
	for _, key := range []string{read, env.admin} {
		list := env.call("GET", "/v1/jobs", key, nil)
		list.must(t, http.StatusOK)
		requireNoSecret(t, list.raw)
		require.Contains(t, string(list.raw), "ax-redacted")
	}

	// GET → PUT: nothing changes in the database.
	wantAuth, wantURL, wantCallback := env.storedSecrets(id)
	require.Equal(t, "Bearer s3cret-header", wantAuth)
	shown := env.call("GET", "/v1/jobs/"+id, env.admin, nil)
	var body map[string]any
	require.NoError(t, json.Unmarshal(shown.raw, &body))
	body["description"] = "put back"
	put := env.call("PUT", "/v1/jobs/"+id, env.admin, body)
	put.must(t, http.StatusOK)
	requireNoSecret(t, put.raw)
	auth, url, callback := env.storedSecrets(id)
	require.Equal(t, []string{wantAuth, wantURL, wantCallback}, []string{auth, url, callback})

	// PATCH of another field, and of one header, keeps the rest.
	env.call("PATCH", "/v1/jobs/"+id, env.admin, map[string]any{"executor": map[string]any{
		"headers": map[string]string{"X-Team": "ops"}}}).must(t, http.StatusOK)
	auth, url, callback = env.storedSecrets(id)
	require.Equal(t, []string{wantAuth, wantURL, wantCallback}, []string{auth, url, callback})

	// A placeholder with nothing behind it: 422 naming the field, no change.
	body["executor"].(map[string]any)["headers"] = map[string]string{"X-Other": "ax-redacted"}
	r := env.call("PUT", "/v1/jobs/"+id, env.admin, body)
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.executor.headers.X-Other"}, r.errorLocations())
	fresh := secretHTTPJob("fresh")
	fresh["callback"] = map[string]any{"url": "https://127.0.0.1:9/hook?token=ax-redacted"}
	r = env.call("POST", "/v1/jobs", env.admin, fresh)
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.callback.url"}, r.errorLocations())
	auth, _, _ = env.storedSecrets(id)
	require.Equal(t, wantAuth, auth)
}

// A declaration sent back as the job shows keeps the stored secrets.
func TestWriteOnlyDeclarationRoundtrip(t *testing.T) {
	t.Parallel()
	env := setup(t)
	report := env.call("POST", "/v1/declarations", env.admin, declaration("sdk:secret", "1", false, secretHTTPJob("s"))).
		must(t, http.StatusOK)
	id := report["jobs"].([]any)[0].(map[string]any)["id"].(string)
	wantAuth, wantURL, wantCallback := env.storedSecrets(id)
	shown := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	again := secretHTTPJob("s")
	again["executor"], again["callback"] = shown["executor"], shown["callback"]
	report = env.call("POST", "/v1/declarations", env.admin, declaration("sdk:secret", "2", false, again)).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"s": "unchanged"}, actions(t, report))
	auth, url, callback := env.storedSecrets(id)
	require.Equal(t, []string{wantAuth, wantURL, wantCallback}, []string{auth, url, callback})
}

// A declaration that changes only a secret says which field changed,
// without its values.
func TestWriteOnlyDeclarationNamesChangedSecret(t *testing.T) {
	t.Parallel()
	env := setup(t)
	env.call("POST", "/v1/declarations", env.admin, declaration("sdk:secret", "1", false, secretHTTPJob("s"))).
		must(t, http.StatusOK)
	changed := secretHTTPJob("s")
	changed["executor"].(map[string]any)["headers"] = map[string]string{"Authorization": "Bearer s3cret-new", "X-Team": "billing"}
	changed["callback"] = map[string]any{"url": "https://127.0.0.1:9/hook?token=s3cret-new"}
	r := env.call("POST", "/v1/declarations", env.admin, declaration("sdk:secret", "2", false, changed))
	report := r.must(t, http.StatusOK)
	require.Equal(t, map[string]string{"s": "updated"}, actions(t, report))
	require.NotContains(t, string(r.raw), "s3cret")
	changes := report["jobs"].([]any)[0].(map[string]any)["changes"]
	require.Equal(t, []any{"callback.url: a write-only query value changed",
		"executor.headers.Authorization: ax-redacted changed"}, changes)
}
