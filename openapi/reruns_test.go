package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/dispatch"
)

// finishShards leases every task of the pending runs and completes shard
// i as outcome(i) says ("" succeeds), with error code code(i).
func (a *agentClient) finishShards(t *testing.T, want int, outcome func(task map[string]any) (state, code string)) {
	t.Helper()
	var tasks []map[string]any
	for len(tasks) < want {
		got := a.lease(100, 2)
		require.NotEmpty(t, got, "leased %d of %d tasks", len(tasks), want)
		tasks = append(tasks, got...)
	}
	require.Len(t, tasks, want)
	for _, task := range tasks {
		state, code := outcome(task)
		result := map[string]any{"task_id": task["task_id"], "lease_token": task["lease_token"], "state": state}
		if code != "" {
			result["error_code"], result["error"] = code, "failed with "+code
		}
		a.post("/complete", map[string]any{"results": []map[string]any{result}}).must(t, http.StatusOK)
	}
}

func shardOf(task map[string]any) int { return int(task["shard_index"].(float64)) }

// shardsOf lists a run's tasks as "index=param" pairs, in index order.
func shardsOf(exec map[string]any) []string {
	var out []string
	for _, x := range exec["tasks"].([]any) {
		task := x.(map[string]any)
		out = append(out, fmt.Sprintf("%d=%v", int(task["shard_index"].(float64)), task["shard_param"]))
	}
	sort.Strings(out)
	return out
}

// TestRerunFailedShardsRunsExactlyThose: a 10-shard run with 3 failed
// shards re-run with shards=failed runs those 3 again, same indexes and
// params, linked both ways; the original is not changed; a retried
// request (same Idempotency-Key, or the same body without one) makes one
// run; shards=all runs all 10.
func TestRerunFailedShardsRunsExactlyThose(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	params := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"}
	jobID := env.manualJob("ten-shards", func(j map[string]any) {
		j["shards"] = map[string]any{"count": 10, "params": params}
		j["retry"] = map[string]any{"max_attempts": 1}
		j["params"] = map[string]any{"day": "2026-12-03"}
		j["callback"] = map[string]any{"url": "http://127.0.0.1:9/ax"} // never sent: no River here
	})
	agent := env.registerAgent("a", nil, 100)
	orig := env.run(jobID, nil)
	failed := map[int]bool{2: true, 5: true, 7: true}
	agent.finishShards(t, 10, func(task map[string]any) (string, string) {
		if failed[shardOf(task)] {
			return "failed", "exit_3"
		}
		return "succeeded", ""
	})
	before := env.call("GET", "/v1/executions/"+orig, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "failed", before["state"])

	// A run that has not ended is not re-run.
	busy := env.run(jobID, nil)
	env.call("POST", "/v1/executions/"+busy+"/rerun", env.admin, nil).must(t, http.StatusConflict)
	agent.finishShards(t, 10, func(map[string]any) (string, string) { return "succeeded", "" })

	req, err := env.request("POST", "/v1/executions/"+orig+"/rerun", env.admin, map[string]any{"shards": "failed"})
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "retry-me")
	rerun := env.do(req).must(t, http.StatusAccepted)
	require.Equal(t, "rerun", rerun["cause"])
	require.Equal(t, orig, rerun["rerun_of"])
	require.Equal(t, []string{"2=p2", "5=p5", "7=p7"}, shardsOf(rerun))
	require.Equal(t, before["scheduled_for"], rerun["scheduled_for"], "the same logical time")
	require.Equal(t, "2026-12-03", rerun["params"].(map[string]any)["day"])
	require.EqualValues(t, 10, rerun["shard_count"])

	// The retry, on the same key, is the same run.
	req, err = env.request("POST", "/v1/executions/"+orig+"/rerun", env.admin, map[string]any{"shards": "failed"})
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "retry-me")
	again := env.do(req).must(t, http.StatusAccepted)
	require.Equal(t, rerun["id"], again["id"])

	// Exactly those three shards are leased, with their indexes and params.
	var leased []string
	agent.finishShards(t, 3, func(task map[string]any) (string, string) {
		require.Equal(t, rerun["id"], task["execution_id"])
		leased = append(leased, fmt.Sprintf("%d=%v", shardOf(task), task["shard_param"]))
		return "succeeded", ""
	})
	sort.Strings(leased)
	require.Equal(t, []string{"2=p2", "5=p5", "7=p7"}, leased)
	require.Empty(t, agent.lease(10, 0))

	done := env.call("GET", "/v1/executions/"+rerun["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "succeeded", done["state"])
	require.Equal(t, orig, done["rerun_of"])
	// Its callback, as any run's, names the run it re-runs.
	rerunID, err := uuid.Parse(rerun["id"].(string))
	require.NoError(t, err)
	cb, err := db.CallbackGetForDelivery(context.Background(), env.pool, rerunID, 10, 4<<20)
	require.NoError(t, err)
	require.Equal(t, orig, cb.RerunOf)
	after := env.call("GET", "/v1/executions/"+orig, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "failed", after["state"], "the original's state is not rewritten")
	require.Equal(t, []any{rerun["id"]}, after["reruns"])

	// Without a key, the same body twice is one run; shards=all runs all.
	all := env.call("POST", "/v1/executions/"+orig+"/rerun", env.admin, map[string]any{"shards": "all"}).must(t, http.StatusAccepted)
	allAgain := env.call("POST", "/v1/executions/"+orig+"/rerun", env.admin, map[string]any{"shards": "all"}).must(t, http.StatusAccepted)
	require.Equal(t, all["id"], allAgain["id"])
	require.Len(t, all["tasks"], 10)
	agent.finishShards(t, 10, func(map[string]any) (string, string) { return "succeeded", "" })

	// A run whose shards all succeeded has no failed shard to re-run.
	env.call("POST", "/v1/executions/"+all["id"].(string)+"/rerun", env.admin, map[string]any{"shards": "failed"}).
		must(t, http.StatusConflict)

	var reruns int
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND cause = 'rerun'", jobID).Scan(&reruns))
	require.Equal(t, 2, reruns)
}

// TestBulkRerunByErrorCode: a bulk re-run selecting failed runs by error
// code lists them with dry_run and changes nothing, then re-runs exactly
// those; the same call again re-runs nothing twice.
func TestBulkRerunByErrorCode(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	jobID := env.manualJob("nightly", func(j map[string]any) { j["retry"] = map[string]any{"max_attempts": 1} })
	agent := env.registerAgent("a", nil, 100)
	codes := []string{"exit_3", "http_503", "exit_3", "", "exit_3"}
	runs := make([]string, len(codes))
	for i, code := range codes {
		runs[i] = env.run(jobID, map[string]any{"n": i})
		agent.finishShards(t, 1, func(map[string]any) (string, string) {
			if code == "" {
				return "succeeded", ""
			}
			return "failed", code
		})
	}
	body := map[string]any{"job_id": jobID, "error_codes": []string{"exit_3"}, "dry_run": true}
	dry := env.call("POST", "/v1/executions/rerun", env.admin, body).must(t, http.StatusOK)
	require.Equal(t, true, dry["dry_run"])
	require.Equal(t, []string{runs[0], runs[2], runs[4]}, bulkIDs(dry, "execution_id"))
	require.Empty(t, bulkIDs(dry, "rerun_id"))
	countReruns := func() int {
		var n int
		require.NoError(t, env.pool.QueryRow(context.Background(),
			"SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND cause = 'rerun'", jobID).Scan(&n))
		return n
	}
	require.Zero(t, countReruns(), "a dry run changes nothing")

	body["dry_run"] = false
	real := env.call("POST", "/v1/executions/rerun", env.admin, body).must(t, http.StatusOK)
	require.Equal(t, []string{runs[0], runs[2], runs[4]}, bulkIDs(real, "execution_id"))
	require.Len(t, bulkIDs(real, "rerun_id"), 3)
	require.Equal(t, 3, countReruns())
	for i, x := range real["runs"].([]any) {
		item := x.(map[string]any)
		got := env.call("GET", "/v1/executions/"+item["rerun_id"].(string), env.admin, nil).must(t, http.StatusOK)
		require.Equal(t, item["execution_id"], got["rerun_of"], "run %d", i)
		require.EqualValues(t, []int{0, 2, 4}[i], got["params"].(map[string]any)["n"])
	}

	// The same call again (a retry) re-runs nothing twice.
	retry := env.call("POST", "/v1/executions/rerun", env.admin, body).must(t, http.StatusOK)
	require.Equal(t, bulkIDs(real, "rerun_id"), bulkIDs(retry, "rerun_id"))
	require.Equal(t, 3, countReruns())

	// The cap: at most max runs, and truncated says more matched.
	capped := env.call("POST", "/v1/executions/rerun", env.admin,
		map[string]any{"job_id": jobID, "dry_run": true, "max": 2}).must(t, http.StatusOK)
	require.Len(t, capped["runs"], 2)
	require.Equal(t, true, capped["truncated"])

	// Hostile input is refused naming the field and changes nothing.
	bad := env.call("POST", "/v1/executions/rerun", env.admin, map[string]any{"error_codes": []string{"Bad Code"}})
	bad.must(t, http.StatusUnprocessableEntity)
	require.Contains(t, bad.errorLocations(), "body.job_id")
	require.Contains(t, bad.errorLocations(), "body.error_codes[0]")
	require.Equal(t, 3, countReruns())
}

func bulkIDs(body map[string]any, field string) []string {
	var out []string
	for _, x := range body["runs"].([]any) {
		if id, ok := x.(map[string]any)[field].(string); ok {
			out = append(out, id)
		}
	}
	return out
}
