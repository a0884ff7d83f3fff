package openapi_test

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/dispatch"
)

// TestParallelLastShardsEndTheRun: two agents reporting the last two
// shards of a run at the same moment, in separate transactions, still end
// it (each used to see the other's shard unfinished).
func TestParallelLastShardsEndTheRun(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	jobID := env.manualJob("pair", func(j map[string]any) { j["shards"] = map[string]any{"count": 2} })
	a, b := env.registerAgent("a", nil, 100), env.registerAgent("b", nil, 100)
	const runs = 20
	var execs []string
	for range runs {
		execs = append(execs, env.run(jobID, nil))
	}
	// Each agent holds one shard of every run.
	var fromA, fromB []map[string]any
	for _, task := range a.lease(runs*2, 0) {
		if task["shard_index"].(float64) == 0 {
			fromA = append(fromA, task)
		} else {
			a.post("/release", map[string]any{"tasks": []any{map[string]any{
				"task_id": task["task_id"], "lease_token": task["lease_token"]}}}).must(t, http.StatusNoContent)
		}
	}
	fromB = b.lease(runs*2, 0)
	require.Len(t, fromA, runs)
	require.Len(t, fromB, runs)
	for i := range runs {
		var wg sync.WaitGroup
		wg.Go(func() { a.complete(fromA[i], "succeeded").must(t, http.StatusOK) })
		wg.Go(func() { b.complete(fromB[i], "succeeded").must(t, http.StatusOK) })
		wg.Wait()
	}
	for _, id := range execs {
		got := env.call("GET", "/v1/executions/"+id, env.admin, nil).must(t, http.StatusOK)
		require.Equal(t, "succeeded", got["state"], id)
	}
}

// TestTimedOutAttemptRetriesClean: the retry of an attempt that timed out
// is not told to cancel, and its own timeout counts from its own start.
func TestTimedOutAttemptRetriesClean(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	jobID := env.manualJob("slowpoke", func(j map[string]any) {
		j["timeout_seconds"] = 1
		j["retry"] = map[string]any{"max_attempts": 2, "backoff_seconds": 1}
	})
	a := env.registerAgent("a", nil, 10)
	env.run(jobID, nil)
	first := a.lease(1, 0)
	require.Len(t, first, 1)
	a.heartbeat(first).must(t, http.StatusOK) // running
	// Its 1 s timeout passes, and the grace its agent has to report it.
	_, err := env.pool.Exec(context.Background(), `UPDATE ax.task SET started_at = started_at - make_interval(secs => $2),
		leased_at = leased_at - make_interval(secs => $2) WHERE id = $1`,
		first[0]["task_id"], (dispatch.DefaultTimeoutGrace + 2*time.Second).Seconds())
	require.NoError(t, err)
	reaper := dispatch.NewReaper(env.pool, dispatch.AgentConfig{}, dispatch.ReaperConfig{})
	require.NoError(t, reaper.Sweep(context.Background()))

	retry := a.lease(1, 3) // after the 1 s backoff
	require.Len(t, retry, 1)
	require.EqualValues(t, 2, retry[0]["attempt"])
	hb := a.heartbeat(retry).must(t, http.StatusOK)
	require.Empty(t, hb["cancel"], "the retry is not cancelled")
	require.NoError(t, reaper.Sweep(context.Background()))
	var state string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		`SELECT state::text FROM ax.all_tasks WHERE id = $1`, retry[0]["task_id"]).Scan(&state))
	require.Equal(t, "running", state, "its timeout counts from its own start, not the first attempt's")
}
