package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestAdaptiveTimeoutOnRealAgent: an adaptive job whose successes took
// 1 s gets a 5 s timeout (the floor); on an ax-agent process its 7 s
// command is stopped at 5 s, and the retry, with twice that, succeeds.
// `ax job get` shows the computed timeout and how it came about.
func TestAdaptiveTimeoutOnRealAgent(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	status, job := s.API(t, "POST", "/v1/jobs", map[string]any{
		"name":         "adaptive",
		"trigger":      map[string]any{"kind": "manual"},
		"executor":     map[string]any{"kind": "shell", "command": `sleep 7; echo "attempt $AX_ATTEMPT finished"`},
		"retry":        map[string]any{"max_attempts": 2, "backoff_seconds": 1},
		"timeout_mode": "adaptive", "timeout_seconds": 60,
	})
	require.Equal(t, http.StatusCreated, status, job)
	id := job["id"].(string)

	// Five earlier successes of 1 s each, ended a minute ago.
	dbtest.EndedRuns(t, pool, uuid.MustParse(id), time.Minute, "succeeded",
		time.Second, time.Second, time.Second, time.Second, time.Second)

	startAgent(t, s, "a1", "1")
	status, exec := s.API(t, "POST", "/v1/jobs/"+id+"/trigger", nil)
	require.Equal(t, http.StatusAccepted, status, exec)
	execID := exec["id"].(string)
	require.Eventually(t, func() bool {
		_, got := s.API(t, "GET", "/v1/executions/"+execID, nil)
		return got["state"] == "succeeded" || got["state"] == "failed" || got["state"] == "timed_out"
	}, 60*time.Second, 200*time.Millisecond)
	_, got := s.API(t, "GET", "/v1/executions/"+execID, nil)
	require.Equal(t, "succeeded", got["state"], got)
	task := got["tasks"].([]any)[0].(map[string]any)
	require.Equal(t, float64(2), task["attempt"])
	require.Equal(t, float64(10), task["timeout_seconds"], "the retry got twice the 5 s")

	// Attempt 1 was stopped at its 5 s, not at the command's 7 s.
	var leased, stopped time.Time
	var why string
	for _, e := range e2ekit.StateEvents(t, pool, task["id"].(string)) {
		switch {
		case e.Attempt == 1 && e.State == "leased":
			leased = e.At
		case e.Attempt == 1 && e.State == "timed_out":
			stopped, why = e.At, e.Message
		}
	}
	require.False(t, stopped.IsZero(), "attempt 1 timed out")
	require.Contains(t, why, "timed out after 5 s")
	require.Less(t, stopped.Sub(leased), 7*time.Second)
	require.GreaterOrEqual(t, stopped.Sub(leased), 5*time.Second)

	out, err := s.AX(t, "job", "get", id)
	require.NoError(t, err)
	require.Contains(t, out, "adaptive 5s (max 60s)")
	require.Contains(t, out, "3 × P95 of 5 successful attempts (3 × 1 s = 3 s) is under the 5 s floor: 5 s")
	out, err = s.AX(t, "job", "get", id, "-o", "json")
	require.NoError(t, err)
	require.True(t, strings.Contains(out, `"basis": "floor"`) || strings.Contains(out, `"basis":"floor"`), out)
}
