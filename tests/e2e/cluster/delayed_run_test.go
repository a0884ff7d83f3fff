package cluster

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// A run for later outlives the server that took it: stored by one `ax
// serve`, which stops before its time, it fires when another starts
// (late, so under the job's misfire policy: fire_once fires it, marked
// misfired), as the execution with the id the first answered, and runs on
// an agent.
func TestDelayedRunSurvivesARestart(t *testing.T) {
	t.Parallel()
	dbURL := dbtest.NewURL(t)
	proctest.ReserveServers(t, 2)
	first := e2ekit.StartServerOn(t, dbURL)
	job := first.CreateJob(t, map[string]any{"name": "close-order", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("echo closing")})
	status, run := first.API(t, "POST", "/v1/jobs/"+job+"/trigger", map[string]any{"delay_seconds": 3600, "params": map[string]any{"order": 7}})
	require.Equal(t, http.StatusAccepted, status, run)
	require.Equal(t, "scheduled", run["state"])
	id := run["id"].(string)

	first.Proc.Signal(syscall.SIGTERM)
	require.NoError(t, first.Proc.Wait(30*time.Second))
	// Down at its time, and past the misfire threshold (5 s): its time is
	// moved back rather than waited for, as no server runs meanwhile.
	pool := e2ekit.OpenPool(t, dbURL)
	tag, err := pool.Exec(context.Background(),
		`UPDATE ax.delayed_run SET run_at = now() - interval '10 seconds' WHERE id = $1`, id)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the run waits in ax.delayed_run")

	second := e2ekit.StartServerOn(t, dbURL)
	second.RunAgent(t, "closer", second.URL)
	require.Equal(t, "succeeded", second.WaitExecution(t, id, 30*time.Second))
	_, got := second.API(t, "GET", "/v1/executions/"+id, nil)
	require.Equal(t, "delayed", got["cause"])
	require.Equal(t, true, got["misfired"])
	require.Equal(t, float64(7), got["params"].(map[string]any)["order"])
	require.Contains(t, second.Output(t, id), "closing")
}
