package openapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// trigger POSTs a trigger call with an optional Idempotency-Key.
func (e *apiEnv) trigger(jobID, idemKey, body string) *response {
	e.t.Helper()
	req, err := http.NewRequest("POST", e.url+"/v1/jobs/"+jobID+"/trigger", stringsReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	return e.do(req)
}

func TestTriggerAndReadExecution(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := cronJob("manual-run", "0 0 * * *", "UTC")
	job["params"] = map[string]any{"region": "eu", "size": 1}
	job["shards"] = map[string]any{"count": 2, "params": []string{"left", "right"}}
	id := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)

	resp := env.trigger(id, "", `{"params":{"size":2}}`)
	exec := resp.must(t, http.StatusAccepted)
	require.Equal(t, "/v1/executions/"+exec["id"].(string), resp.header.Get("Location"))
	require.Equal(t, "manual", exec["cause"])
	require.Equal(t, "pending", exec["state"])
	require.Equal(t, map[string]any{"region": "eu", "size": float64(2)}, exec["params"], "trigger params overlay the job's")

	got := env.call("GET", resp.header.Get("Location"), env.admin, nil).must(t, http.StatusOK)
	tasks := got["tasks"].([]any)
	require.Len(t, tasks, 2)
	require.Equal(t, "right", tasks[1].(map[string]any)["shard_param"])

	jobNow := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, exec["id"], jobNow["last_execution_id"])
	require.Equal(t, "pending", jobNow["last_state"])

	list := env.call("GET", "/v1/jobs/"+id+"/executions", env.admin, nil).must(t, http.StatusOK)
	require.Len(t, list["executions"], 1)
	list = env.call("GET", "/v1/executions?state=succeeded&job_id="+id, env.admin, nil).must(t, http.StatusOK)
	require.Empty(t, list["executions"])

	cancelled := env.call("POST", "/v1/executions/"+exec["id"].(string)+"/cancel", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "cancelled", cancelled["state"], "only pending tasks: cancelled at once")
	again := env.call("POST", "/v1/executions/"+exec["id"].(string)+"/cancel", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, cancelled["finished_at"], again["finished_at"], "cancelling twice changes nothing")

	env.call("GET", "/v1/executions/01a22b9a-bfcc-7aeb-889e-fd18f31ac4ad", env.admin, nil).must(t, http.StatusNotFound)
	env.call("GET", "/v1/jobs/01a22b9a-bfcc-7aeb-889e-fd18f31ac4ad/executions", env.admin, nil).must(t, http.StatusNotFound)
	env.call("GET", "/v1/executions?job_id=01a22b9a-bfcc-7aeb-889e-fd18f31ac4ad", env.admin, nil).must(t, http.StatusNotFound)
	env.trigger("01a22b9a-bfcc-7aeb-889e-fd18f31ac4ad", "", "").must(t, http.StatusNotFound)
}

func TestTriggerIdempotencyKey(t *testing.T) {
	t.Parallel()
	env := setup(t)
	id := env.call("POST", "/v1/jobs", env.admin, cronJob("idem", "0 0 * * *", "UTC")).must(t, http.StatusCreated)["id"].(string)

	first := env.trigger(id, "order-42", `{"params":{"order":42}}`).must(t, http.StatusAccepted)
	second := env.trigger(id, "order-42", `{"params":{"order":42}}`).must(t, http.StatusAccepted)
	require.Equal(t, first["id"], second["id"], "same key, same body: the same execution")

	mismatch := env.trigger(id, "order-42", `{"params":{"order":43}}`)
	mismatch.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"header.Idempotency-Key"}, mismatch.errorLocations())

	other := env.trigger(id, "order-43", `{"params":{"order":43}}`).must(t, http.StatusAccepted)
	require.NotEqual(t, first["id"], other["id"])

	var n int
	require.NoError(t, env.pool.QueryRow(context.Background(), "SELECT count(*) FROM ax.all_executions").Scan(&n))
	require.Equal(t, 2, n)
}

func TestTriggerForbidOverlap(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := cronJob("solo", "0 0 * * *", "UTC")
	job["concurrency_policy"] = "forbid"
	id := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	env.trigger(id, "", "").must(t, http.StatusAccepted)
	env.trigger(id, "", "").must(t, http.StatusConflict)
}

// TestTriggerQueueOverlap: the API accepts concurrency_policy queue (and
// refuses an unknown policy naming the field); a manual trigger during an
// unfinished run waits behind it, shown as queue.waiting on the run, and a
// third trigger while one waits answers 409.
func TestTriggerQueueOverlap(t *testing.T) {
	t.Parallel()
	env := setup(t)
	bad := cronJob("serial", "0 0 * * *", "UTC")
	bad["concurrency_policy"] = "queued"
	refused := env.call("POST", "/v1/jobs", env.admin, bad)
	refused.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.concurrency_policy"}, refused.errorLocations())
	job := cronJob("serial", "0 0 * * *", "UTC")
	job["concurrency_policy"] = "queue"
	created := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)
	require.Equal(t, "queue", created["concurrency_policy"])
	id := created["id"].(string)

	first := env.trigger(id, "", "").must(t, http.StatusAccepted)
	waiting := env.trigger(id, "", "").must(t, http.StatusAccepted)
	env.trigger(id, "", "").must(t, http.StatusConflict)

	got := env.call("GET", "/v1/executions/"+waiting["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "pending", got["state"])
	q := got["queue"].(map[string]any)
	require.Equal(t, true, q["waiting"])
	require.Equal(t, first["id"], q["behind"])
	require.Nil(t, q["released_at"])

	env.call("POST", "/v1/executions/"+first["id"].(string)+"/cancel", env.admin, nil).must(t, http.StatusOK)
	got = env.call("GET", "/v1/executions/"+waiting["id"].(string), env.admin, nil).must(t, http.StatusOK)
	q = got["queue"].(map[string]any)
	require.Equal(t, false, q["waiting"])
	require.NotNil(t, q["released_at"])
}

// TestAnExecutionGivesTheResultsThatFitItsAnswer: a run of 40 shards, each
// with a result of about 1 MiB that Postgres does not compress (hex from
// md5) and a short error on one. GET /v1/executions/{id} lists every task
// but gives the results of only as many as 8 MiB hold (the rest marked
// result_omitted); shards_from gives the later ones. Before, one GET read
// every result into the replica: 10 GB for 10,000 shards of 1 MiB.
func TestAnExecutionGivesTheResultsThatFitItsAnswer(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := cronJob("big-results", "0 0 * * *", "UTC")
	job["shards"] = map[string]any{"count": 40}
	id := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	exec := env.trigger(id, "", "").must(t, http.StatusAccepted)["id"].(string)
	_, err := env.pool.Exec(context.Background(), `
		UPDATE ax.task SET state = 'succeeded', finished_at = now(),
		       result = to_jsonb((SELECT string_agg(md5(random()::text || i || shard_index), '')
		                          FROM generate_series(1, 32000) AS i))
		WHERE execution_id = $1`, exec)
	require.NoError(t, err)
	listed := func(query string) (given []int, omitted []int, bytes int) {
		resp := env.call("GET", "/v1/executions/"+exec+query, env.admin, nil)
		body := resp.must(t, http.StatusOK)
		for _, raw := range body["tasks"].([]any) {
			task := raw.(map[string]any)
			i := int(task["shard_index"].(float64))
			switch {
			case task["result"] != nil:
				require.Nil(t, task["result_omitted"])
				given = append(given, i)
			default:
				require.Equal(t, true, task["result_omitted"], "shard %d", i)
				omitted = append(omitted, i)
			}
		}
		return given, omitted, len(resp.raw)
	}
	given, omitted, size := listed("")
	require.Len(t, given, 8, "8 results of 1 MiB in 8 MiB")
	require.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7}, given)
	require.Len(t, omitted, 32)
	require.Less(t, size, 9<<20)
	given, omitted, _ = listed("?shards_from=36")
	require.Equal(t, []int{36, 37, 38, 39}, given)
	require.Len(t, omitted, 36)

	// Results Postgres compresses 87:1 (one repeated character) count as
	// 32 times their stored size: some of them, not all 40 MiB.
	_, err = env.pool.Exec(context.Background(), `UPDATE ax.task SET result = to_jsonb(repeat('x', 1048000))
		WHERE execution_id = $1`, exec)
	require.NoError(t, err)
	given, _, size = listed("")
	require.Less(t, len(given), 40)
	require.Less(t, size, 26<<20, "%d results", len(given))
}
