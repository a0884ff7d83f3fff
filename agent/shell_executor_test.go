package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// chunkSink collects the log chunks a task ships.
type chunkSink struct {
	mu     sync.Mutex
	chunks []LogChunk
}

func (s *chunkSink) ship(c LogChunk) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chunks = append(s.chunks, c)
	return true
}

// text joins what was shipped on stream.
func (s *chunkSink) text(stream string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, c := range s.chunks {
		if c.Stream == stream {
			b.WriteString(c.Data)
		}
	}
	return b.String()
}

func runShell(t *testing.T, ctx context.Context, command string, killGrace time.Duration) (json.RawMessage, error, *chunkSink) {
	t.Helper()
	task := LeasedTask{TaskID: "task-1", ExecutionID: "exec-1", JobID: "job-1", ShardIndex: 2, ShardTotal: 5,
		ShardParam: "eu-west", Attempt: 3, LeaseToken: "tok", Params: json.RawMessage(`{"day":"2024-05-01"}`),
		Executor: Executor{Kind: KindShell, Command: command}, TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	sink := &chunkSink{}
	out := newTaskOutput(task.Ref(), 1<<20, sink.ship)
	e := &shellExecutor{shell: "/bin/sh", killGrace: killGrace}
	res, err := e.execute(ctx, task, out, slog.New(slog.DiscardHandler))
	return res, err, sink
}

func TestShellExecutorPassesTaskInEnvironment(t *testing.T) {
	t.Setenv("AX_AGENT_KEY", "secret-bootstrap-key") // no t.Parallel: Setenv
	res, err, sink := runShell(t, context.Background(),
		`printf '%s|' "$AX_EXECUTION_ID" "$AX_TASK_ID" "$AX_JOB_ID" "$AX_SHARD_INDEX" "$AX_SHARD_TOTAL" `+
			`"$AX_IDEMPOTENCY_KEY" "$AX_SHARD_PARAM" "$AX_ATTEMPT" "$AX_PARAMS" "${AX_AGENT_KEY:-unset}" "$TRACEPARENT"`, time.Second)
	require.NoError(t, err)
	require.JSONEq(t, `{"exit_code": 0}`, string(res))
	require.Equal(t, `exec-1|task-1|job-1|2|5|exec-1:2|eu-west|3|{"day":"2024-05-01"}|unset|00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01|`, sink.text(streamStdout))
}

func TestShellExecutorExitCodes(t *testing.T) {
	t.Parallel()
	res, err, sink := runShell(t, context.Background(), `echo working; echo "disk full" >&2; exit 3`, time.Second)
	require.JSONEq(t, `{"exit_code": 3}`, string(res))
	require.EqualError(t, err, "exit code 3: disk full")
	require.Equal(t, "working\n", sink.text(streamStdout))
	require.Equal(t, "disk full\n", sink.text(streamStderr))

	res, err, _ = runShell(t, context.Background(), `exit 0`, time.Second)
	require.NoError(t, err)
	require.JSONEq(t, `{"exit_code": 0}`, string(res))
}

func TestShellExecutorStderrTailInError(t *testing.T) {
	t.Parallel()
	_, err, _ := runShell(t, context.Background(),
		`i=0; while [ $i -lt 2000 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo "the real reason" >&2; exit 1`, time.Second)
	require.Error(t, err)
	require.True(t, strings.HasSuffix(err.Error(), "the real reason"), err.Error())
	require.LessOrEqual(t, len(err.Error()), stderrTailBytes+100)
}

// The timeout must stop the whole process group: the shell, and a
// grandchild that ignores SIGTERM (it inherits the shell's ignored signal)
// and so needs the SIGKILL after the grace.
func TestShellExecutorKillsProcessGroupOnTimeout(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	began := time.Now()
	res, err, _ := runShell(t, ctx, fmt.Sprintf(`trap '' TERM; sleep 60 & echo $! > %s; wait`, pidFile), 300*time.Millisecond)
	elapsed := time.Since(began)

	require.Error(t, err)
	require.Contains(t, err.Error(), "killed by signal killed")
	require.JSONEq(t, `{"exit_code": 137, "signal": "killed"}`, string(res))
	require.Less(t, elapsed, 3*time.Second, "execute waited for the grandchild")
	pid := readPID(t, pidFile)
	require.Eventually(t, func() bool { return !processAlive(pid) }, 3*time.Second, 10*time.Millisecond,
		"grandchild sleep %d survived", pid)
}

func TestShellExecutorTerminatesGracefullyFirst(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	began := time.Now()
	res, err, sink := runShell(t, ctx, `trap 'echo got TERM; exit 7' TERM; sleep 60 & wait`, 10*time.Second)
	require.Less(t, time.Since(began), 5*time.Second, "SIGTERM was not enough: waited for the SIGKILL")
	require.EqualError(t, err, "exit code 7")
	require.JSONEq(t, `{"exit_code": 7}`, string(res))
	require.Equal(t, "got TERM\n", sink.text(streamStdout))
}

// A command that leaves a background process behind ends when the shell
// ends: the leftover is killed and does not hold the task open.
func TestShellExecutorKillsLeftoversAfterExit(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "pid")
	began := time.Now()
	_, err, _ := runShell(t, context.Background(), fmt.Sprintf(`sleep 60 & echo $! > %s; echo started`, pidFile), time.Second)
	require.NoError(t, err)
	require.Less(t, time.Since(began), 3*time.Second)
	pid := readPID(t, pidFile)
	require.Eventually(t, func() bool { return !processAlive(pid) }, 3*time.Second, 10*time.Millisecond)
}

// The command prints its second line only once the test has seen the
// first shipped (a file the test makes), so no timing is assumed: on a
// loaded machine a fixed pause between the lines was over before the
// first was looked for.
func TestShellExecutorStreamsOutputWhileRunning(t *testing.T) {
	t.Parallel()
	goOn := filepath.Join(t.TempDir(), "go-on")
	task := LeasedTask{TaskID: "t", LeaseToken: "tok", Executor: Executor{Kind: KindShell,
		Command: fmt.Sprintf(`echo first; while [ ! -e %s ]; do sleep 0.01; done; echo second`, goOn)}}
	sink := &chunkSink{}
	out := newTaskOutput(task.Ref(), 1<<20, sink.ship)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = (&shellExecutor{shell: "/bin/sh", killGrace: time.Second}).execute(context.Background(), task, out, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { // also when the test fails: the command ends
		_ = os.WriteFile(goOn, nil, 0o600)
		<-done
	})
	require.Eventually(t, func() bool { return sink.text(streamStdout) == "first\n" }, 10*time.Second, 5*time.Millisecond,
		"the first line is shipped before the command ends")
	require.NoError(t, os.WriteFile(goOn, nil, 0o600))
	<-done
	require.Equal(t, "first\nsecond\n", sink.text(streamStdout))
	for _, c := range sink.chunks {
		require.Equal(t, "t", c.TaskID)
		require.Equal(t, "tok", c.LeaseToken)
	}
}

func TestShellExecutorEmptyCommand(t *testing.T) {
	t.Parallel()
	_, err, _ := runShell(t, context.Background(), "  ", time.Second)
	require.ErrorContains(t, err, "no command")
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	var data []byte
	require.Eventually(t, func() bool {
		var err error
		data, err = os.ReadFile(path)
		return err == nil && len(strings.TrimSpace(string(data))) > 0
	}, 3*time.Second, 10*time.Millisecond)
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	require.NoError(t, err)
	return pid
}

// processAlive reports whether pid runs; a zombie waiting for a parent
// that does not reap it counts as dead.
func processAlive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, after, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(after, "Z")
}
