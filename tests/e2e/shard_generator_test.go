package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestGeneratedShardParamsReachAgents: the shards of a mod job's run, run
// by a real ax-agent process under a real ax serve, each see in
// AX_SHARD_PARAM their own residue, the param the shard preview shows
// for that fire.
func TestGeneratedShardParamsReachAgents(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	startAgent(t, s, "gen", "4")
	status, job := s.API(t, "POST", "/v1/jobs", map[string]any{
		"name":     "mod-sharded",
		"trigger":  map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": `echo "shard=$AX_SHARD_INDEX param=$AX_SHARD_PARAM"`},
		"shards":   map[string]any{"count": 4, "generator": map[string]any{"kind": "mod"}},
	})
	require.Equal(t, http.StatusCreated, status, job)
	jobID := job["id"].(string)
	status, exec := s.API(t, "POST", "/v1/jobs/"+jobID+"/trigger", nil)
	require.Equal(t, http.StatusAccepted, status, exec)
	execID := exec["id"].(string)

	require.Eventually(t, func() bool {
		_, got := s.API(t, "GET", "/v1/executions/"+execID, nil)
		return got["state"] == "succeeded" || got["state"] == "failed"
	}, 60*time.Second, 200*time.Millisecond)
	_, got := s.API(t, "GET", "/v1/executions/"+execID, nil)
	require.Equal(t, "succeeded", got["state"], got)

	status, preview := s.API(t, "POST", "/v1/jobs/"+jobID+"/shards/preview", map[string]any{"at": got["scheduled_for"]})
	require.Equal(t, http.StatusOK, status, preview)
	_, logs := s.API(t, "GET", "/v1/executions/"+execID+"/logs?kind=log", nil)
	var output strings.Builder
	for _, e := range logs["events"].([]any) {
		output.WriteString(e.(map[string]any)["message"].(string))
	}
	shards := preview["shards"].([]any)
	require.Len(t, shards, 4)
	for i, raw := range shards {
		param := raw.(map[string]any)["param"].(string)
		require.JSONEq(t, fmt.Sprintf(`{"modulus":4,"residue":%d}`, i), param)
		line := fmt.Sprintf("shard=%d param=%s", i, param)
		require.Equal(t, 1, strings.Count(output.String(), line), "shard %d ran once with its residue: %s", i, output.String())
	}
}
