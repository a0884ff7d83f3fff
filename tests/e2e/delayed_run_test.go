package e2e

import (
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
)

// A run for later outlives the server that took it: stored by one `ax
// serve`, which stops before its time, it fires when another starts
// (late, so under the job's misfire policy: fire_once fires it, marked
// misfired), as the execution with the id the first answered, and runs on
// an agent.
func TestDelayedRunSurvivesARestart(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	first := startServerOn(t, dbURL)
	job := first.createJob(t, map[string]any{"name": "close-order", "trigger": map[string]any{"kind": "manual"},
		"executor": shell("echo closing")})
	status, run := first.api(t, "POST", "/v1/jobs/"+job+"/trigger", map[string]any{"delay_seconds": 3, "params": map[string]any{"order": 7}})
	require.Equal(t, http.StatusAccepted, status, run)
	require.Equal(t, "scheduled", run["state"])
	id := run["id"].(string)
	runAt, err := time.Parse(time.RFC3339Nano, run["scheduled_for"].(string))
	require.NoError(t, err)

	first.proc.Signal(syscall.SIGTERM)
	require.NoError(t, first.proc.Wait(30*time.Second))
	time.Sleep(time.Until(runAt.Add(6 * time.Second))) // down at its time, and past the misfire threshold

	second := startServerOn(t, dbURL)
	second.runAgent(t, "closer", second.url)
	require.Equal(t, "succeeded", second.waitExecution(t, id, 30*time.Second))
	_, got := second.api(t, "GET", "/v1/executions/"+id, nil)
	require.Equal(t, "delayed", got["cause"])
	require.Equal(t, true, got["misfired"])
	require.Equal(t, float64(7), got["params"].(map[string]any)["order"])
	require.Contains(t, second.output(t, id), "closing")
}
