package openapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Route keys and body templates with loops, variables or growing
// functions are refused when the job is saved, each naming its field.
func TestCostlyTemplatesAreRefusedAtSave(t *testing.T) {
	t.Parallel()
	env := setup(t)
	keyed := func(key string) map[string]any {
		j := cronJob("keyed", "* * * * *", "UTC")
		j["route"] = map[string]any{"strategy": "consistent_hash", "key": key}
		return j
	}
	bodied := func(body string) map[string]any {
		j := cronJob("bodied", "* * * * *", "UTC")
		j["executor"] = map[string]any{"kind": "http", "url": "http://127.0.0.1:9/", "body": body}
		return j
	}
	cases := []struct {
		job      map[string]any
		location string
	}{
		{keyed(`{{range 1000000000}}x{{end}}`), "body.route.key"},
		{keyed(`{{$x := .params}}{{$x}}`), "body.route.key"},
		{keyed(`{{printf "%999999d" 1}}`), "body.route.key"},
		{keyed(`{{define "a"}}{{template "a"}}{{end}}{{template "a"}}`), "body.route.key"},
		{bodied(`{{range 1000000000}}{{json $.params}}{{end}}`), "body.executor.body"},
		{bodied(`{{json (json (json .params))}}`), "body.executor.body"},
	}
	for _, c := range cases {
		resp := env.call("POST", "/v1/jobs", env.admin, c.job)
		resp.must(t, http.StatusUnprocessableEntity)
		require.Contains(t, resp.errorLocations(), c.location, string(resp.raw))
	}
	require.Zero(t, env.countJobs())

	ok := keyed(`{{if .params.customer_id}}customer_id={{.params.customer_id}}{{else}}{{.job.name}}{{end}}`)
	env.call("POST", "/v1/jobs", env.admin, ok).must(t, http.StatusCreated)
	ok = bodied(`{"params": {{json .params}}, "shard": {{.shard.param | json}}}`)
	env.call("POST", "/v1/jobs", env.admin, ok).must(t, http.StatusCreated)
}

// A job saved before templates were bounded (written here straight into
// the table) renders under the limits at fire time: its task is left
// unassigned at once, and another job fired at the same time is not held
// up behind it.
func TestCostlyRouteKeyAtFireDoesNotHoldUpOthers(t *testing.T) {
	t.Parallel()
	env := setupRouted(t)
	env.registerAgent("a", nil, 10)
	env.registerAgent("b", nil, 10)
	keyed := func(j map[string]any) {
		j["route"] = map[string]any{"strategy": "consistent_hash", "key": "{{.params.id}}"}
	}
	costly := env.manualJob("costly", keyed)
	healthy := env.manualJob("healthy", keyed)
	_, err := env.pool.Exec(context.Background(),
		`UPDATE ax.job SET route_key = '{{range 2000000000}}{{end}}' WHERE id = $1`, costly)
	require.NoError(t, err)
	huge := env.manualJob("huge", keyed) // valid, but renders past the output cap
	_, err = env.pool.Exec(context.Background(),
		`UPDATE ax.job SET route_key = '{{.params.s}}{{.params.s}}' WHERE id = $1`, huge)
	require.NoError(t, err)

	start := time.Now()
	var wg sync.WaitGroup
	took := map[string]time.Duration{}
	status := map[string]int{}
	var mu sync.Mutex
	for _, id := range []string{costly, huge, healthy} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			params := map[string]any{"id": 7, "s": strings.Repeat("s", 3000)}
			resp := env.call("POST", "/v1/jobs/"+id+"/trigger", env.admin, map[string]any{"params": params})
			mu.Lock()
			defer mu.Unlock()
			took[id], status[id] = time.Since(start), resp.status
		}()
	}
	wg.Wait()
	for id, d := range took {
		require.Equal(t, http.StatusAccepted, status[id], "trigger of job %s", id)
		// Run, the costly key's loop would take minutes (it writes
		// nothing, so no output cap would stop it); a loaded machine took
		// over 2 s to answer these three calls.
		require.Less(t, d, 10*time.Second, "trigger of job %s", id)
	}
	var unassigned, routed int
	require.NoError(t, env.pool.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE job_id IN ($1, $2) AND preferred_agent_id IS NULL),
		count(*) FILTER (WHERE job_id = $3 AND preferred_agent_id IS NOT NULL AND route_key = '7')
		FROM ax.all_tasks`, costly, huge, healthy).Scan(&unassigned, &routed))
	require.Equal(t, 2, unassigned, "the costly keys' tasks run unassigned")
	require.Equal(t, 1, routed, "the healthy job is routed by its key")
}
