package e2e

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// startAgent runs an ax-agent process against s.
func startAgent(t *testing.T, s *e2ekit.Server, name string, capacity string) *proctest.Process {
	t.Helper()
	out, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "create", "--scope", "agent").Output()
	require.NoError(t, err)
	return proctest.Start(t, proctest.Binary(t, "ax-agent"), []string{
		"AX_SERVER=" + s.URL, "AX_AGENT_KEY=" + strings.TrimSpace(string(out)),
		"AX_AGENT_NAME=" + name, "AX_AGENT_CAPACITY=" + capacity,
		"AX_EXECUTORS=shell,http,handler", // these tests run shell jobs
	})
}

// TestShardedJobOnRealAgents: a 10-shard shell job over 3 ax-agent
// processes; every shard runs once with its own index and param, and the
// execution succeeds.
func TestShardedJobOnRealAgents(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	for _, name := range []string{"a1", "a2", "a3"} {
		startAgent(t, s, name, "2")
	}
	params := []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7", "p8", "p9"}
	status, job := s.API(t, "POST", "/v1/jobs", map[string]any{
		"name":     "sharded",
		"trigger":  map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": `echo "shard=$AX_SHARD_INDEX/$AX_SHARD_TOTAL param=$AX_SHARD_PARAM exec=$AX_EXECUTION_ID"`},
		"shards":   map[string]any{"count": 10, "params": params},
	})
	require.Equal(t, http.StatusCreated, status, job)
	status, exec := s.API(t, "POST", "/v1/jobs/"+job["id"].(string)+"/trigger", nil)
	require.Equal(t, http.StatusAccepted, status, exec)
	execID := exec["id"].(string)

	require.Eventually(t, func() bool {
		_, got := s.API(t, "GET", "/v1/executions/"+execID, nil)
		return got["state"] == "succeeded" || got["state"] == "failed"
	}, 60*time.Second, 200*time.Millisecond)
	_, got := s.API(t, "GET", "/v1/executions/"+execID, nil)
	require.Equal(t, "succeeded", got["state"], got)

	_, logs := s.API(t, "GET", "/v1/executions/"+execID+"/logs?kind=log", nil)
	var output strings.Builder
	for _, e := range logs["events"].([]any) {
		output.WriteString(e.(map[string]any)["message"].(string))
	}
	for i, p := range params {
		line := "shard=" + string(rune('0'+i)) + "/10 param=" + p + " exec=" + execID
		require.Equal(t, 1, strings.Count(output.String(), line), "shard %d runs once with its own index and param", i)
	}
	_, agents := s.API(t, "GET", "/v1/agents", nil)
	require.Len(t, agents["agents"], 3)
}
