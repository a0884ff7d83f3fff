package e2e

import (
	"context"
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
	status, run := first.api(t, "POST", "/v1/jobs/"+job+"/trigger", map[string]any{"delay_seconds": 3600, "params": map[string]any{"order": 7}})
	require.Equal(t, http.StatusAccepted, status, run)
	require.Equal(t, "scheduled", run["state"])
	id := run["id"].(string)

	first.proc.Signal(syscall.SIGTERM)
	require.NoError(t, first.proc.Wait(30*time.Second))
	// Down at its time, and past the misfire threshold (5 s): its time is
	// moved back rather than waited for, as no server runs meanwhile.
	pool := openPool(t, dbURL)
	tag, err := pool.Exec(context.Background(),
		`UPDATE ax.delayed_run SET run_at = now() - interval '10 seconds' WHERE id = $1`, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the run waits in ax.delayed_run")

	second := startServerOn(t, dbURL)
	second.runAgent(t, "closer", second.url)
	require.Equal(t, "succeeded", second.waitExecution(t, id, 30*time.Second))
	_, got := second.api(t, "GET", "/v1/executions/"+id, nil)
	require.Equal(t, "delayed", got["cause"])
	require.Equal(t, true, got["misfired"])
	require.Equal(t, float64(7), got["params"].(map[string]any)["order"])
	require.Contains(t, second.output(t, id), "closing")
}
