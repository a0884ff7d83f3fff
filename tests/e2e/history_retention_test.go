package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestHistoryRetentionRemovesOldRuns runs `ax serve` with a retention of
// seconds (4 s for succeeded runs, 5 minutes for failed ones, partitions
// 2 s wide) and a real agent. A succeeded run is removed within
// seconds of its retention: GET answers 410 Gone, the views and `ax exec
// list` no longer show it, ax.history_drop and GET /v1/history record
// the drop. A failed run of the same age stays (its longer retention); a
// run still running, older than the retention, is never removed; a
// succeeded run of a job whose own retention is 5 minutes stays.
func TestHistoryRetentionRemovesOldRuns(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	s := e2ekit.StartServerOn(t, dbURL, "AX_HISTORY_RETENTION=4s", "AX_HISTORY_FAILED_RETENTION=5m",
		"AX_HISTORY_PARTITION_WIDTH=2s")
	s.RunAgent(t, "a1", s.URL, "AX_AGENT_CAPACITY=4")
	s.AgentReady(t, "a1")
	pool := e2ekit.OpenPool(t, dbURL)

	quick := s.CreateJob(t, map[string]any{"name": "quick", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("echo done"), "retry": map[string]any{"max_attempts": 1}})
	kept := s.CreateJob(t, map[string]any{"name": "kept", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("echo done"), "retry": map[string]any{"max_attempts": 1},
		"history": map[string]any{"retention_seconds": 300}})
	failing := s.CreateJob(t, map[string]any{"name": "failing", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("exit 3"), "retry": map[string]any{"max_attempts": 1}})
	slow := s.CreateJob(t, map[string]any{"name": "slow", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("sleep 60"), "retry": map[string]any{"max_attempts": 1}})

	status, job := s.API(t, "GET", "/v1/jobs/"+kept, nil)
	require.Equal(t, http.StatusOK, status, job)
	require.Equal(t, map[string]any{"retention_seconds": float64(300)}, job["history"], "the job's override is shown")

	running := s.Trigger(t, slow)
	removed, keptRun, failed := s.Trigger(t, quick), s.Trigger(t, kept), s.Trigger(t, failing)
	require.Equal(t, "succeeded", s.WaitExecution(t, removed, 30*time.Second))
	require.Equal(t, "succeeded", s.WaitExecution(t, keptRun, 30*time.Second))
	require.Equal(t, "failed", s.WaitExecution(t, failed, 30*time.Second))

	// Retention 4 s, partitions 2 s wide, maintenance every second: gone
	// within about 7 s of its end.
	require.Eventually(t, func() bool {
		status, _ := s.API(t, "GET", "/v1/executions/"+removed, nil)
		return status == http.StatusGone
	}, 30*time.Second, 200*time.Millisecond, "the succeeded run is removed")
	status, gone := s.API(t, "GET", "/v1/executions/"+removed, nil)
	require.Equal(t, http.StatusGone, status)
	require.Contains(t, gone["detail"], "history retention")
	status, _ = s.API(t, "GET", "/v1/executions/01900000-0000-7000-8000-000000000000", nil)
	require.Equal(t, http.StatusNotFound, status, "an id that never was is not found, not gone")

	for id, want := range map[string]string{running: "running", keptRun: "succeeded", failed: "failed"} {
		status, got := s.API(t, "GET", "/v1/executions/"+id, nil)
		require.Equal(t, http.StatusOK, status, got)
		require.Equal(t, want, got["state"], id)
	}

	ctx := context.Background()
	var inViews, tasksInViews, drops, droppedRows int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM ax.all_executions WHERE id = $1),
		       (SELECT count(*) FROM ax.all_tasks WHERE execution_id = $1),
		       (SELECT count(*) FROM ax.history_drop WHERE row_count > 0),
		       (SELECT coalesce(sum(row_count), 0) FROM ax.history_drop)`, removed).
		Scan(&inViews, &tasksInViews, &drops, &droppedRows))
	require.Zero(t, inViews)
	require.Zero(t, tasksInViews)
	require.Positive(t, drops)
	require.GreaterOrEqual(t, droppedRows, 2, "the execution and its task")
	var live, history int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM ax.execution), (SELECT count(*) FROM ax.execution_history)`).
		Scan(&live, &history))
	require.Equal(t, 1, live, "only the run in flight is live")
	require.Equal(t, 2, history, "the kept and the failed run are in history")

	out, err := s.AX(t, "exec", "list")
	require.NoError(t, err, out)
	for _, id := range []string{running, keptRun, failed} {
		require.Contains(t, out, id)
	}
	require.NotContains(t, out, removed)

	// Two 2 s partitions are dropped every 2 s, most of them empty: ask for
	// enough drops to reach back to the run's on a slow machine (the
	// default shows the latest 20, 20 s of them).
	status, hist := s.API(t, "GET", "/v1/history?drops=1000", nil)
	require.Equal(t, http.StatusOK, status, hist)
	require.Equal(t, float64(4), hist["retention_seconds"])
	require.Equal(t, float64(300), hist["failed_retention_seconds"])
	var dropRows float64
	for _, d := range hist["drops"].([]any) {
		dropRows += d.(map[string]any)["rows"].(float64)
	}
	require.GreaterOrEqual(t, dropRows, float64(2))
	require.True(t, strings.Contains(s.Proc.Output(), `"msg":"history partition dropped"`), "drops are logged")
}
