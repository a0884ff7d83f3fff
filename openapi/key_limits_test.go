package openapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// limitedKey creates a key with scopes and limits and returns its secret.
func (e *apiEnv) limitedKey(limits queue.KeyLimits, scopes ...string) string {
	e.t.Helper()
	secret, _, err := queue.NewKeyService(e.pool).Create(context.Background(), "limited", scopes, limits)
	require.NoError(e.t, err)
	return secret
}

// TestAgentKeyBoundToLabels (item 7): an agent key bound to pool=billing
// registers no agent with other labels (403 naming the field), and its
// agents lease nothing outside that pool, not even untargeted jobs; their
// own tokens register nothing.
func TestAgentKeyBoundToLabels(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	bound := env.limitedKey(queue.KeyLimits{Labels: map[string][]string{"pool": {"billing", "reports"}}}, openapi.ScopeAgent)
	all := []string{"shell", "http", "handler"}

	for labels, field := range map[string]map[string]string{
		"body.labels.pool": {"pool": "payments"},
		"body.labels.gpu":  {"pool": "billing", "gpu": "yes"},
	} {
		r := env.call("POST", "/v1/agents/register", bound, map[string]any{"name": "x", "capacity": 1,
			"labels": field, "executors": all})
		r.must(t, http.StatusForbidden)
		require.Equal(t, []string{labels}, r.errorLocations(), string(r.raw))
	}
	var agents int
	require.NoError(t, env.pool.QueryRow(context.Background(), "SELECT count(*) FROM ax.agent").Scan(&agents))
	require.Zero(t, agents, "a refused registration changes nothing")

	biller := env.registerWith(bound, "biller", map[string]any{"labels": map[string]string{"pool": "billing"}, "executors": all})
	env.call("POST", "/v1/agents/register", biller.token, map[string]any{"name": "y", "capacity": 1}).
		must(t, http.StatusForbidden) // an agent's token registers nothing

	jobIn := func(name, pool string) string {
		job := cronJob(name, "0 0 * * *", "UTC")
		job["target"] = map[string]any{"labels": map[string]string{"pool": pool}}
		return env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	}
	billing, payments := jobIn("bill", "billing"), jobIn("pay", "payments")
	anywhere := env.call("POST", "/v1/jobs", env.admin, cronJob("any", "0 0 * * *", "UTC")).must(t, http.StatusCreated)["id"].(string)
	env.trigger(payments, "", "").must(t, http.StatusAccepted)
	env.trigger(anywhere, "", "").must(t, http.StatusAccepted)
	env.trigger(billing, "", "").must(t, http.StatusAccepted)
	tasks := biller.lease(10, 1)
	require.Len(t, tasks, 1)
	require.Equal(t, billing, tasks[0]["job_id"])
	require.Empty(t, biller.lease(10, 1), "neither the payments task nor an untargeted one is the billing agent's")
	free := env.registerAgent("free", nil, 4) // registered with an unbound key
	got := free.lease(10, 1)
	require.Len(t, got, 1)
	require.Equal(t, anywhere, got[0]["job_id"])
}

// TestKeyLimitedToGroups (item 11): a submit key limited to group billing
// sees only billing's jobs and runs (others are 404, not 403, so their
// names and ids do not leak) and changes nothing elsewhere.
func TestKeyLimitedToGroups(t *testing.T) {
	t.Parallel()
	env := setup(t)
	limited := env.limitedKey(queue.KeyLimits{Groups: []string{"billing"}}, openapi.ScopeSubmit)
	jobIn := func(key, name, group string) *response {
		job := cronJob(name, "0 0 * * *", "UTC")
		job["trigger"] = map[string]any{"kind": "manual"}
		if group != "" {
			job["group"] = group
		}
		return env.call("POST", "/v1/jobs", key, job)
	}
	mine := jobIn(env.admin, "invoice", "billing").must(t, http.StatusCreated)["id"].(string)
	theirs := jobIn(env.admin, "report", "reports").must(t, http.StatusCreated)["id"].(string)
	myRun := env.call("POST", "/v1/jobs/"+mine+"/trigger", env.admin, nil).must(t, http.StatusAccepted)["id"].(string)
	theirRun := env.call("POST", "/v1/jobs/"+theirs+"/trigger", env.admin, nil).must(t, http.StatusAccepted)["id"].(string)

	// Lists hold only billing.
	jobs := env.call("GET", "/v1/jobs", limited, nil).must(t, http.StatusOK)["jobs"].([]any)
	require.Len(t, jobs, 1)
	require.Equal(t, mine, jobs[0].(map[string]any)["id"])
	require.Empty(t, env.call("GET", "/v1/jobs?group=reports", limited, nil).must(t, http.StatusOK)["jobs"])
	runs := env.call("GET", "/v1/executions", limited, nil).must(t, http.StatusOK)["executions"].([]any)
	require.Len(t, runs, 1)
	require.Equal(t, myRun, runs[0].(map[string]any)["id"])

	// Everything of reports is 404.
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/jobs/" + theirs}, {"PUT", "/v1/jobs/" + theirs}, {"DELETE", "/v1/jobs/" + theirs},
		{"POST", "/v1/jobs/" + theirs + "/pause"}, {"POST", "/v1/jobs/" + theirs + "/resume"},
		{"POST", "/v1/jobs/" + theirs + "/trigger"}, {"GET", "/v1/jobs/" + theirs + "/executions"},
		{"GET", "/v1/jobs/" + theirs + "/skipped"}, {"POST", "/v1/jobs/" + theirs + "/signing-secret/rotate"},
		{"GET", "/v1/executions?job_id=" + theirs},
		{"GET", "/v1/executions/" + theirRun}, {"GET", "/v1/executions/" + theirRun + "?wait=1s"},
		{"POST", "/v1/executions/" + theirRun + "/cancel"}, {"GET", "/v1/executions/" + theirRun + "/logs"},
		{"POST", "/v1/executions/" + theirRun + "/callback/redeliver"},
	} {
		var body any
		if c.method == "PUT" {
			body = cronJob("report", "0 0 * * *", "UTC")
		}
		r := env.call(c.method, c.path, limited, body)
		require.Equal(t, http.StatusNotFound, r.status, "%s %s: %s", c.method, c.path, r.raw)
		require.NotContains(t, string(r.raw), "report", "%s %s leaks nothing", c.method, c.path)
	}

	// New jobs and runs go to billing only.
	r := jobIn(limited, "sneaky", "reports")
	r.must(t, http.StatusForbidden)
	require.Equal(t, []string{"body.group"}, r.errorLocations())
	jobIn(limited, "sneaky", "").must(t, http.StatusForbidden) // the default group is not billing
	r = env.call("POST", "/v1/runs", limited, map[string]any{"executor": map[string]any{"kind": "shell", "command": "id"}})
	r.must(t, http.StatusForbidden)
	require.Equal(t, []string{"body.group"}, r.errorLocations())
	moved := cronJob("invoice", "0 0 * * *", "UTC")
	moved["group"] = "reports"
	env.call("PUT", "/v1/jobs/"+mine, limited, moved).must(t, http.StatusForbidden)

	// Nothing of reports changed.
	var jobsInReports, cancelled int
	ctx := context.Background()
	require.NoError(t, env.pool.QueryRow(ctx, "SELECT count(*) FROM ax.job WHERE group_name <> 'billing'").Scan(&jobsInReports))
	require.Equal(t, 1, jobsInReports)
	require.NoError(t, env.pool.QueryRow(ctx, "SELECT count(*) FROM ax.all_executions WHERE state = 'cancelled'").Scan(&cancelled))
	require.Zero(t, cancelled)

	// And billing works as for any submit key.
	jobIn(limited, "refund", "billing").must(t, http.StatusCreated)
	env.call("GET", "/v1/jobs/"+mine, limited, nil).must(t, http.StatusOK)
	env.call("GET", "/v1/executions/"+myRun+"/logs", limited, nil).must(t, http.StatusOK)
	env.call("POST", "/v1/jobs/"+mine+"/trigger", limited, nil).must(t, http.StatusAccepted)
	env.call("POST", "/v1/runs", limited, map[string]any{"group": "billing",
		"executor": map[string]any{"kind": "handler", "handler": "refund"}}).must(t, http.StatusAccepted)
	env.call("POST", "/v1/executions/"+myRun+"/cancel", limited, nil).must(t, http.StatusOK)
}

func TestKeyLimitsAreChecked(t *testing.T) {
	t.Parallel()
	env := setup(t)
	ctx := context.Background()
	for name, c := range map[string]struct {
		scopes []string
		limits queue.KeyLimits
	}{
		"groups on admin":      {[]string{openapi.ScopeAdmin}, queue.KeyLimits{Groups: []string{"a"}}},
		"labels on submit":     {[]string{openapi.ScopeSubmit}, queue.KeyLimits{Labels: map[string][]string{"a": {"b"}}}},
		"empty group":          {[]string{openapi.ScopeSubmit}, queue.KeyLimits{Groups: []string{""}}},
		"label without values": {[]string{openapi.ScopeAgent}, queue.KeyLimits{Labels: map[string][]string{"a": nil}}},
	} {
		_, _, err := queue.NewKeyService(env.pool).Create(ctx, name, c.scopes, c.limits)
		require.Error(t, err, name)
	}
	labels, err := queue.ParseKeyLabels("pool=billing, pool=reports,zone=eu")
	require.NoError(t, err)
	require.Equal(t, map[string][]string{"pool": {"billing", "reports"}, "zone": {"eu"}}, labels)
}
