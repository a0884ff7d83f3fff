package openapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
)

// dbState is everything an API call that stores input could change:
// jobs and their triggers as whole rows, runs, delayed runs, declaration
// sets, rate classes.
func (e *apiEnv) dbState() string {
	e.t.Helper()
	var s string
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT concat_ws(' | ',
		(SELECT json_agg(j ORDER BY j.id) FROM ax.job j), (SELECT json_agg(t ORDER BY t.job_id) FROM ax.trigger t),
		(SELECT count(*) FROM ax.all_executions), (SELECT count(*) FROM ax.delayed_run),
		(SELECT count(*) FROM ax.declaration_set), (SELECT json_agg(c ORDER BY c.name) FROM ax.rate_class c))`).Scan(&s))
	return s
}

// A value Go's decoder takes and Postgres refuses (a lone UTF-16
// surrogate escape, \u0000, a number beyond numeric) was a 500 on every
// path that stores a body. It is a 400 naming the field, on each of
// them, and nothing changes in the database.
func TestUnstorableInputIsRefusedOnEveryPath(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := env.call("POST", "/v1/jobs", env.admin,
		`{"name":"ok","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"},"params":{"a":1}}`).
		must(t, http.StatusCreated)
	id := job["id"].(string)
	jobBody := func(name, extra string) string {
		return `{"name":"` + name + `","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"}` + extra + `}`
	}
	for _, c := range []struct {
		name, method, path, body, location string
	}{
		{"create params", "POST", "/v1/jobs", jobBody("a", `,"params":{"x":"\ud800"}`), "body.params.x"},
		{"create params low surrogate", "POST", "/v1/jobs", jobBody("a", `,"params":{"x":["ok","a\udc00"]}`), "body.params.x[1]"},
		{"create params number", "POST", "/v1/jobs", jobBody("a", `,"params":{"n":0.`+strings.Repeat("0", 16384)+`1}`), "body.params.n"},
		{"create description NUL", "POST", "/v1/jobs", jobBody("a", `,"description":"a\u0000b"`), "body.description"},
		{"create header value", "POST", "/v1/jobs", `{"name":"h","trigger":{"kind":"manual"},
			"executor":{"kind":"http","url":"http://127.0.0.1:1/","headers":{"X-A":"\udfff"}}}`, "body.executor.headers.X-A"},
		{"create label", "POST", "/v1/jobs", jobBody("l", `,"target":{"labels":{"pool":"\ud83d"}}`), "body.target.labels.pool"},
		{"ad-hoc run", "POST", "/v1/runs", `{"executor":{"kind":"shell","command":"true"},"params":{"x":"\ud800"}}`, "body.params.x"},
		{"delayed ad-hoc run", "POST", "/v1/runs", `{"executor":{"kind":"shell","command":"true"},"delay_seconds":60,"params":{"x":"\ud800"}}`, "body.params.x"},
		{"trigger", "POST", "/v1/jobs/" + id + "/trigger", `{"params":{"x":"\ud800"}}`, "body.params.x"},
		{"delayed trigger", "POST", "/v1/jobs/" + id + "/trigger", `{"delay_seconds":60,"params":{"deep":{"x":"\ud800"}}}`, "body.params.deep.x"},
		{"put", "PUT", "/v1/jobs/" + id, jobBody("ok", `,"params":{"x":"\ud800"}`), "body.params.x"},
		{"patch", "PATCH", "/v1/jobs/" + id, `{"params":{"x":"\ud800"}}`, "body.params.x"},
		{"patch description", "PATCH", "/v1/jobs/" + id, `{"description":"\u0000"}`, "body.description"},
		{"batch", "POST", "/v1/runs/batch", `{"runs":[{"job_id":"` + id + `"},{"job_id":"` + id + `","delay_seconds":60,"params":{"x":"\ud800"}}]}`,
			"body.runs[1].params.x"},
		{"declaration", "POST", "/v1/declarations", `{"managed_by":"s","jobs":[` + jobBody("d1", "") + `,` +
			jobBody("d2", `,"params":{"x":"\ud800"}`) + `]}`, "body.jobs[1].params.x"},
		{"declaration source", "POST", "/v1/declarations", `{"managed_by":"s","source":"\u0000","jobs":[]}`, "body.source"},
		// Plain text fields: the decoder would have made \ud800 U+FFFD.
		{"class description", "POST", "/v1/classes", `{"name":"c","rate":1,"burst":1,"description":"a\ud800"}`, "body.description"},
		{"cancel reason", "POST", "/v1/runs/cancel", `{"idempotency_keys":["k"],"reason":"\ud800"}`, "body.reason"},
	} {
		before := env.dbState()
		resp := env.call(c.method, c.path, env.admin, c.body)
		require.Equal(t, http.StatusBadRequest, resp.status, "%s: %s", c.name, resp.raw)
		require.Equal(t, []string{c.location}, resp.errorLocations(), "%s: %s", c.name, resp.raw)
		require.Equal(t, "application/problem+json", resp.header.Get("Content-Type"), c.name)
		require.Equal(t, before, env.dbState(), "%s changed the database", c.name)
	}
	// A surrogate pair is a character and is stored.
	created := env.call("POST", "/v1/jobs", env.admin, jobBody("pair", `,"params":{"x":"\ud83d\ude00"}`)).must(t, http.StatusCreated)
	require.Equal(t, map[string]any{"x": "😀"}, created["params"])
}

// Params are at most 256 KiB on every path that stores them. A batch run
// and a declared job took 8 MiB (their bodies' limit), sent again with
// every lease of every task. Each path answers 422 naming the params at
// fault, and stores nothing; params at the limit are taken.
func TestParamsSizeLimitOnEveryPath(t *testing.T) {
	t.Parallel()
	env := setup(t)
	params := func(size int) string { // a JSON object of exactly size bytes
		return `{"x":"` + strings.Repeat("a", size-8) + `"}`
	}
	over, atLimit := params(openapi.MaxParamsBytes+1), params(openapi.MaxParamsBytes)
	jobBody := func(name, p string) string {
		return `{"name":"` + name + `","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"},"params":` + p + `}`
	}
	job := env.call("POST", "/v1/jobs", env.admin, jobBody("ok", `{"a":1}`)).must(t, http.StatusCreated)
	id := job["id"].(string)
	run := func(p string) string { return `{"job_id":"` + id + `","delay_seconds":60,"params":` + p + `}` }
	for _, c := range []struct {
		name, method, path, body, location string
	}{
		{"create", "POST", "/v1/jobs", jobBody("a", over), "body.params"},
		{"put", "PUT", "/v1/jobs/" + id, jobBody("ok", over), "body.params"},
		{"patch", "PATCH", "/v1/jobs/" + id, `{"params":` + over + `}`, "body.params"},
		{"trigger", "POST", "/v1/jobs/" + id + "/trigger", `{"params":` + over + `}`, "body.params"},
		{"delayed trigger", "POST", "/v1/jobs/" + id + "/trigger", `{"delay_seconds":7200,"params":` + over + `}`, "body.params"},
		{"ad-hoc run", "POST", "/v1/runs", `{"executor":{"kind":"shell","command":"true"},"params":` + over + `}`, "body.params"},
		{"delayed ad-hoc run", "POST", "/v1/runs", `{"executor":{"kind":"shell","command":"true"},"delay_seconds":3600,"params":` + over + `}`, "body.params"},
		{"batch", "POST", "/v1/runs/batch", `{"runs":[` + run(`{}`) + `,` + run(`{}`) + `,` + run(`{}`) + `,` + run(over) + `]}`, "body.runs[3].params"},
		{"declaration", "POST", "/v1/declarations", `{"managed_by":"s","jobs":[` + jobBody("d1", `{}`) + `,` + jobBody("d2", over) + `]}`, "body.jobs[1].params"},
	} {
		before := env.dbState()
		resp := env.call(c.method, c.path, env.admin, c.body)
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s: %.300s", c.name, resp.raw)
		require.Equal(t, []string{c.location}, resp.errorLocations(), "%s: %.300s", c.name, resp.raw)
		require.Contains(t, string(resp.raw), "at most 262144 bytes", c.name)
		require.Equal(t, before, env.dbState(), "%s changed the database", c.name)
	}
	// At the limit, every path takes them.
	env.call("POST", "/v1/jobs", env.admin, jobBody("b", atLimit)).must(t, http.StatusCreated)
	env.call("PUT", "/v1/jobs/"+id, env.admin, jobBody("ok", atLimit)).must(t, http.StatusOK)
	env.call("POST", "/v1/jobs/"+id+"/trigger", env.admin, `{"params":`+atLimit+`}`).must(t, http.StatusAccepted)
	env.call("POST", "/v1/runs", env.admin, `{"executor":{"kind":"shell","command":"true"},"params":`+atLimit+`}`).must(t, http.StatusAccepted)
	env.call("POST", "/v1/runs/batch", env.admin, `{"runs":[`+run(atLimit)+`]}`).must(t, http.StatusAccepted)
	env.call("POST", "/v1/declarations", env.admin, `{"managed_by":"s","jobs":[`+jobBody("d2", atLimit)+`]}`).must(t, http.StatusOK)
}
