package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// TestCompleteOneBadResultCostsOnlyItself reports 200 results in one call,
// two of them with a lone UTF-16 surrogate that Go's decoder accepts and
// jsonb refuses: before, the whole call was a 500 and
// no result was stored; now those two fail with bad_result, not retried,
// and the 198 others are stored.
func TestCompleteOneBadResultCostsOnlyItself(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	job := cronJob("many", "0 0 * * *", "UTC")
	job["shards"] = map[string]any{"count": 200}
	job["retry"] = map[string]any{"max_attempts": 3, "backoff_seconds": 1}
	jobID := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("worker", nil, 1000)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	tasks := a.lease(1000, 0)
	require.Len(t, tasks, 200)

	const badJSON, badError = 57, 143 // badError: a failure whose result is bad
	results := make([]map[string]any, len(tasks))
	for i, task := range tasks {
		results[i] = map[string]any{"task_id": task["task_id"], "lease_token": task["lease_token"],
			"state": "succeeded", "result": json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))}
	}
	results[badJSON]["result"] = json.RawMessage(`{"x":"\ud800"}`)
	results[badError]["state"] = "failed"
	results[badError]["result"] = json.RawMessage(`["ok", {"y":"\udc00 alone"}]`)
	reply := a.post("/complete", map[string]any{"results": results}).must(t, http.StatusOK)

	outcomes := reply["results"].([]any)
	require.Len(t, outcomes, 200)
	for i, o := range outcomes {
		o := o.(map[string]any)
		require.Equal(t, "accepted", o["status"], "result %d", i)
		if i == badJSON || i == badError {
			require.Equal(t, "bad_result", o["error_code"], "result %d", i)
			require.Contains(t, o["error"], "cannot store", "result %d", i)
		} else {
			require.Nil(t, o["error_code"], "result %d", i)
		}
	}
	done := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "failed", done["state"], "two tasks failed for good: a bad result is not retried")
	states := map[string]int{}
	for _, task := range done["tasks"].([]any) {
		task := task.(map[string]any)
		states[task["state"].(string)]++
		if task["state"] == "failed" {
			require.Equal(t, "bad_result", task["error_code"])
			require.Contains(t, task["error"], "cannot store the task's result")
		}
	}
	require.Equal(t, map[string]int{"succeeded": 198, "failed": 2}, states)
}

// TestAResultLargerThanAResultMayBeIsNotStored: a request of results may
// be 8 MiB, and nothing bounded one result, so a run of 1,000 shards could
// hold 8 GB of results, read whole by each callback delivery, explain and
// re-run. A result of 1 MiB and one byte (the SDKs' own bound) is
// recorded as a failure with result_too_large and without the result,
// retried as any failure; the result beside it is stored. Before, both
// were stored.
func TestAResultLargerThanAResultMayBeIsNotStored(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	job := cronJob("large", "0 0 * * *", "UTC")
	job["shards"] = map[string]any{"count": 3}
	job["retry"] = map[string]any{"max_attempts": 2, "backoff_seconds": 1}
	jobID := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("worker", nil, 10)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	tasks := a.lease(10, 0)
	require.Len(t, tasks, 3)
	large := json.RawMessage(`"` + strings.Repeat("x", axtype.MaxResultBytes-1) + `"`) // 1 MiB + 1 byte
	reply := a.post("/complete", map[string]any{"results": []map[string]any{
		{"task_id": tasks[0]["task_id"], "lease_token": tasks[0]["lease_token"], "state": "succeeded", "result": large},
		{"task_id": tasks[1]["task_id"], "lease_token": tasks[1]["lease_token"], "state": "succeeded", "result": map[string]any{"ok": true}},
		// An SDK that refused a large result itself: not told of it again.
		{"task_id": tasks[2]["task_id"], "lease_token": tasks[2]["lease_token"], "state": "failed",
			"error": "result is more than 1048576 bytes", "error_code": "result_too_large"},
	}}).must(t, http.StatusOK)
	outcomes := reply["results"].([]any)
	require.Equal(t, "result_too_large", outcomes[0].(map[string]any)["error_code"])
	require.Contains(t, outcomes[0].(map[string]any)["error"], "1048577 bytes")
	require.Nil(t, outcomes[1].(map[string]any)["error_code"])
	require.Nil(t, outcomes[2].(map[string]any)["error_code"])

	var bytes int
	var state string
	require.NoError(t, env.pool.QueryRow(context.Background(), `SELECT coalesce(octet_length(result::text), 0), state::text
		FROM ax.all_tasks WHERE id = $1`, tasks[0]["task_id"]).Scan(&bytes, &state))
	require.Zero(t, bytes, "the large result is not stored")
	require.Equal(t, "pending", state, "retried as any failure")
	done := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	for _, task := range done["tasks"].([]any) {
		if task := task.(map[string]any); task["id"] == tasks[1]["task_id"] {
			require.Equal(t, map[string]any{"ok": true}, task["result"])
		}
	}
}

// TestLogChunksAreMadeStorable: task output is any bytes. A chunk with a
// lone surrogate escape or \u0000 is not refused (nor does it refuse the
// chunks beside it): it is stored with U+FFFD and U+2400 in their place.
func TestLogChunksAreMadeStorable(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	jobID := env.call("POST", "/v1/jobs", env.admin, cronJob("logs", "0 0 * * *", "UTC")).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("worker", nil, 10)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	tasks := a.lease(10, 0)
	require.Len(t, tasks, 1)
	chunk := func(data string) string {
		return fmt.Sprintf(`{"task_id":%q,"lease_token":%q,"stream":"stdout","data":"%s"}`,
			tasks[0]["task_id"], tasks[0]["lease_token"], data)
	}
	body := json.RawMessage(`{"chunks":[` + chunk(`a\ud800b`) + `,` + chunk(`c\u0000d`) + `,` + chunk(`plain`) + `]}`)
	a.post("/logs", body).must(t, http.StatusNoContent)

	logs := env.call("GET", "/v1/executions/"+exec["id"].(string)+"/logs?kind=log", env.admin, nil).must(t, http.StatusOK)
	var got []string
	for _, e := range logs["events"].([]any) {
		got = append(got, e.(map[string]any)["message"].(string))
	}
	require.Equal(t, []string{"a\uFFFDb", "c\u2400d", "plain"}, got)
}
