package cluster

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestAgentMarkedOfflineRegistersAgain: a real ax-agent whose row goes
// offline (as the reaper does to a silent agent) has its token refused
// (401) from then on; it registers again under a new id, and the new
// registration runs the next job.
func TestAgentMarkedOfflineRegistersAgain(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_HEARTBEAT_INTERVAL=1s", "AX_LEASE=10s")
	s.RunAgent(t, "phoenix", s.URL)
	old := s.AgentReady(t, "phoenix")
	pool, err := pgxpool.New(context.Background(), s.DBURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	_, err = pool.Exec(context.Background(), `UPDATE ax.agent SET state = 'offline' WHERE id = $1`, old)
	require.NoError(t, err)

	var again string
	require.Eventually(t, func() bool {
		_ = pool.QueryRow(context.Background(), `
			SELECT id::text FROM ax.agent WHERE name = 'phoenix' AND state = 'active' AND id <> $1`, old).Scan(&again)
		return again != ""
	}, 30*time.Second, 100*time.Millisecond, "the agent registers again")
	var revoked bool
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT k.revoked_at IS NOT NULL FROM ax.agent a JOIN ax.api_key k ON k.id = a.api_key_id WHERE a.id = $1`,
		old).Scan(&revoked))
	require.True(t, revoked, "its token is revoked")
	var state string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT state::text FROM ax.agent WHERE id = $1`, old).Scan(&state))
	require.Equal(t, "offline", state, "the old registration stays offline")

	job := s.CreateJob(t, map[string]any{"name": "after-offline", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("echo back")})
	exec := s.Trigger(t, job)
	require.Equal(t, "succeeded", s.WaitExecution(t, exec, 30*time.Second))
	status, out := s.API(t, "GET", "/v1/executions/"+exec, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, again, out["tasks"].([]any)[0].(map[string]any)["agent_id"], "run by the new registration")
}
