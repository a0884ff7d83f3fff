package e2e

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// loneSurrogate is an answer Go's JSON decoder accepts and Postgres's
// jsonb refuses.
const loneSurrogate = `{"x":"\ud800"}`

// TestBadResultCostsOnlyItself: an HTTP target answers 200 with a lone
// surrogate. On a real ax-agent, beside three `echo hi` shell tasks: the
// three succeed within seconds and the HTTP task fails with bad_result
// (before, every complete of the agent was a 500, retried forever, and
// the shell tasks stayed running). Agentless: the task fails with
// bad_result at once and the target is not called again (before, the
// worker failed and called it again 15 minutes later).
func TestBadResultCostsOnlyItself(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	s.RunAgent(t, "worker", s.URL, "AX_AGENT_LABELS=pool=w")
	s.AgentReady(t, "worker")
	var calls atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(loneSurrogate))
	}))
	t.Cleanup(target.Close)
	onAgent := map[string]any{"labels": map[string]string{"pool": "w"}}
	create := func(name string, executor, target map[string]any) string {
		job := map[string]any{"name": name, "trigger": map[string]any{"kind": "manual"}, "executor": executor,
			"retry": map[string]any{"max_attempts": 3, "backoff_seconds": 1}}
		if target != nil {
			job["target"] = target
		}
		status, created := s.API(t, "POST", "/v1/jobs", job)
		require.Equal(t, http.StatusCreated, status, created)
		return created["id"].(string)
	}
	badOnAgent := create("bad-on-agent", map[string]any{"kind": "http", "url": target.URL}, onAgent)
	shell := create("echo", map[string]any{"kind": "shell", "command": "echo hi"}, onAgent)
	badAgentless := create("bad-agentless", map[string]any{"kind": "http", "url": target.URL}, nil)

	bad := s.Trigger(t, badOnAgent)
	var echoes []string
	for range 3 {
		echoes = append(echoes, s.Trigger(t, shell))
	}
	start := time.Now()
	for _, id := range echoes {
		require.Equal(t, "succeeded", s.WaitExecution(t, id, 30*time.Second))
	}
	t.Logf("the three shell tasks succeeded within %s", time.Since(start))
	require.Less(t, time.Since(start), 15*time.Second, "within seconds")
	requireBadResult(t, s, bad)

	agentless := s.Trigger(t, badAgentless)
	requireBadResult(t, s, agentless)
	// Nothing is left that would call the target again: each bad task
	// ended on its first attempt (a retry, after its 1 s backoff, would
	// have kept its run going), and the agentless task's River job is done
	// once River has recorded it, not waiting to retry (before, it was
	// retryable and called the target again 15 minutes later).
	pool := e2ekit.OpenPool(t, s.DBURL)
	ctx := context.Background()
	for _, exec := range []string{bad, agentless} {
		var failed, attempts int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE state = 'failed'), max(attempt)
			FROM ax.all_tasks WHERE execution_id = $1`, exec).Scan(&failed, &attempts))
		require.Equal(t, 1, failed, "its one task failed")
		require.Equal(t, 1, attempts, "on its first attempt")
	}
	var riverState string
	require.Eventually(t, func() bool {
		err := pool.QueryRow(ctx, `SELECT state::text FROM ax.river_job
			WHERE kind = 'ax_http_task' AND args->>'execution_id' = $1`, agentless).Scan(&riverState)
		return err == nil && riverState != "running" && riverState != "available"
	}, 10*time.Second, 20*time.Millisecond, "River records the agentless task's job")
	require.Equal(t, "completed", riverState, "the agentless task's job is not retried")
	require.Equal(t, int32(2), calls.Load(), "each bad task called its target once: a bad result is not retried")
}

func requireBadResult(t *testing.T, s *e2ekit.Server, execID string) {
	t.Helper()
	require.Equal(t, "failed", s.WaitExecution(t, execID, 30*time.Second))
	_, exec := s.API(t, "GET", "/v1/executions/"+execID, nil)
	tasks := exec["tasks"].([]any)
	require.Len(t, tasks, 1)
	task := tasks[0].(map[string]any)
	require.Equal(t, "bad_result", task["error_code"], task)
	require.Contains(t, task["error"], "surrogate", task)
	require.EqualValues(t, 1, task["attempt"], task)
}
