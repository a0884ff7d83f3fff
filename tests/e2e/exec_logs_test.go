package e2e

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestCLIExecLogs: `ax exec logs ID -f` against a real server and agent
// prints each task's output as it comes, as `shard N [stream] line`, and
// exits 0 once the run succeeded; without -f, paging one event at a time,
// it prints the same; following a run that fails exits 1 after printing
// its output.
func TestCLIExecLogs(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	startAgent(t, s, "logger", "2")
	dir := t.TempDir()
	finish := filepath.Join(dir, "finish")
	jobID := s.CreateJob(t, map[string]any{
		"name": "talkative", "trigger": e2ekit.Manual, "shards": map[string]any{"count": 2},
		"executor": e2ekit.Shell(`echo "first of $AX_SHARD_INDEX"
while [ ! -e ` + finish + ` ]; do sleep 0.1; done
echo "second of $AX_SHARD_INDEX"; printf 'warn %s' "$AX_SHARD_INDEX" >&2`),
	})
	execID := s.Trigger(t, jobID)

	cmd := exec.Command(proctest.Binary(t, "ax"), "exec", "logs", execID, "-f", "--interval", "200ms")
	cmd.Env = append(os.Environ(), "AX_SERVER="+s.URL, "AX_API_KEY="+s.Key)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var got []string
	next := func() string {
		t.Helper()
		select {
		case l, ok := <-lines:
			require.True(t, ok, "ax exec logs -f ended early; stderr: %s", stderr.String())
			got = append(got, l)
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("no line from ax exec logs -f; so far %q", got)
			return ""
		}
	}
	// Both shards print their first line and wait: -f shows them while the
	// run is still running.
	first := []string{next(), next()}
	require.ElementsMatch(t, []string{"shard 0 [stdout] first of 0", "shard 1 [stdout] first of 1"}, first)
	_, run := s.API(t, "GET", "/v1/executions/"+execID, nil)
	require.Equal(t, "running", run["state"], "the lines were followed, not printed at the end")

	require.NoError(t, os.WriteFile(finish, nil, 0o644))
	for l := range lines {
		got = append(got, l)
	}
	require.NoError(t, cmd.Wait(), "a succeeded run exits 0; stderr: %s", stderr.String())
	require.Len(t, got, 6, "%q", got)
	require.ElementsMatch(t, []string{
		"shard 0 [stdout] first of 0", "shard 1 [stdout] first of 1",
		"shard 0 [stdout] second of 0", "shard 1 [stdout] second of 1",
		"shard 0 [stderr] warn 0", "shard 1 [stderr] warn 1", // no newline: printed once the run ended
	}, got)
	require.Equal(t, "succeeded", s.WaitExecution(t, execID, 5*time.Second))

	// The whole log again, one event per request.
	out, err := s.AX(t, "exec", "logs", execID, "--page-size", "1")
	require.NoError(t, err)
	require.ElementsMatch(t, got, strings.Split(strings.TrimSpace(out), "\n"))

	// A run that fails: its output, then exit status 1.
	failing := s.CreateJob(t, map[string]any{
		"name": "failing", "trigger": e2ekit.Manual, "executor": e2ekit.Shell(`echo "about to fail"; exit 3`),
		"retry": map[string]any{"max_attempts": 1},
	})
	failedID := s.Trigger(t, failing)
	out, err = s.AX(t, "exec", "logs", failedID, "-f")
	require.Equal(t, "shard 0 [stdout] about to fail\n", out)
	var cliErr *e2ekit.CLIError
	require.ErrorAs(t, err, &cliErr)
	var exitErr *exec.ExitError
	require.True(t, errors.As(cliErr.Err, &exitErr))
	require.Equal(t, 1, exitErr.ExitCode())
	require.Contains(t, cliErr.Stderr, "execution "+failedID+" failed")
}
