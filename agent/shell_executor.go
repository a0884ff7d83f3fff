package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ax-scheduler/ax/queue/httptask"
)

// stderrTailBytes is how much of the end of stderr a failed command's error
// carries: enough for the message that explains the failure.
const stderrTailBytes = 4 << 10

// outputDrainWait bounds the wait for a command's output after its process
// group is gone: a process that left the group (setsid) may still hold the
// pipes open.
const outputDrainWait = 2 * time.Second

// shellExecutor runs a task's command with /bin/sh -c in a process group of
// its own, so that stopping the task stops everything the command started.
type shellExecutor struct {
	shell string
	// killGrace is how long the group has between SIGTERM and SIGKILL.
	killGrace time.Duration
}

func (e *shellExecutor) execute(ctx context.Context, t LeasedTask, out *taskOutput, log *slog.Logger) (json.RawMessage, error) {
	if strings.TrimSpace(t.Executor.Command) == "" {
		return nil, errors.New("shell task has no command")
	}
	cmd := exec.Command(e.shell, "-c", t.Executor.Command)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(inheritedEnv(), taskEnv(t)...)
	stdout, stderr := out.stream(streamStdout), out.stream(streamStderr)
	tail := &tailBuffer{max: stderrTailBytes}
	capture, err := startCapturing(cmd, stdout, io.MultiWriter(stderr, tail))
	if err != nil {
		return nil, fmt.Errorf("error starting %s: %w", e.shell, err)
	}
	log.DebugContext(ctx, "shell command started", "pid", cmd.Process.Pid)
	waitErr := e.wait(ctx, cmd)
	capture.finish(outputDrainWait)
	stdout.Close()
	stderr.Close()
	return exitResult(waitErr, tail)
}

// wait waits for the shell; when ctx ends first it stops the whole process
// group, SIGTERM then SIGKILL after the grace. Whatever happened, what is
// left of the group once the shell exited is killed: a task's background
// processes must not outlive it unseen, nor keep its output open.
func (e *shellExecutor) wait(ctx context.Context, cmd *exec.Cmd) error {
	pgid := cmd.Process.Pid
	exited := make(chan struct{})
	stop := context.AfterFunc(ctx, func() { terminateGroup(pgid, e.killGrace, exited) })
	err := cmd.Wait()
	close(exited)
	stop()
	_ = syscall.Kill(-pgid, syscall.SIGKILL) // ESRCH when the group is already gone
	return err
}

func terminateGroup(pgid int, grace time.Duration, exited <-chan struct{}) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

// exitResult turns the shell's end into the task's result {"exit_code": N}
// and, when N is not 0, an error ending with the tail of stderr.
func exitResult(waitErr error, tail *tailBuffer) (json.RawMessage, error) {
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return nil, fmt.Errorf("error waiting for the command: %w", waitErr)
	}
	res := struct {
		ExitCode int    `json:"exit_code"`
		Signal   string `json:"signal,omitempty"`
	}{}
	what, code := "", ""
	if exitErr != nil {
		res.ExitCode, res.Signal, what, code = describeExit(exitErr)
	}
	result, err := json.Marshal(res)
	if err != nil || res.ExitCode == 0 {
		return result, err
	}
	if stderr := strings.TrimSpace(tail.String()); stderr != "" {
		what += ": " + stderr
	}
	return result, WithErrorCode(code, errors.New(what))
}

// describeExit reports a killed command like a shell does, exit code
// 128+signal, with the error code signal_<name> (exit_<n> for a command
// that exited).
func describeExit(e *exec.ExitError) (exitCode int, signal, what, errorCode string) {
	if ws, ok := e.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), ws.Signal().String(), "killed by signal " + ws.Signal().String(),
			signalErrorCode(ws.Signal())
	}
	return e.ExitCode(), "", "exit code " + strconv.Itoa(e.ExitCode()), exitErrorCode(e.ExitCode())
}

// taskEnv is what a command learns about its task.
func taskEnv(t LeasedTask) []string {
	params := strings.TrimSpace(string(t.Params))
	if params == "" || params == "null" {
		params = "{}"
	}
	env := []string{
		"AX_EXECUTION_ID=" + t.ExecutionID,
		"AX_TASK_ID=" + t.TaskID,
		"AX_JOB_ID=" + t.JobID,
		"AX_SHARD_INDEX=" + strconv.Itoa(t.ShardIndex),
		"AX_SHARD_TOTAL=" + strconv.Itoa(t.ShardTotal),
		"AX_SHARD_PARAM=" + t.ShardParam,
		"AX_IDEMPOTENCY_KEY=" + httptask.IdempotencyKey(t.ExecutionID, t.ShardIndex, t.ShardTotal),
		"AX_ATTEMPT=" + strconv.Itoa(t.Attempt),
		"AX_PARAMS=" + params,
	}
	if t.TraceParent != "" {
		env = append(env, "TRACEPARENT="+t.TraceParent) // the name OpenTelemetry's env carriers read
	}
	return env
}

// inheritedEnv is the agent's environment without its own AX_ settings:
// tasks must not see the agent's key, nor stale AX_ values that could be
// mistaken for their own.
func inheritedEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AX_") {
			env = append(env, kv)
		}
	}
	return env
}

// capture copies a command's stdout and stderr through pipes the agent
// owns. With exec's own copying, Wait would block for as long as any
// process holding the pipes lives; owning the read ends lets the agent stop
// reading when it decides to.
type capture struct {
	readers sync.WaitGroup
	files   []*os.File
}

func startCapturing(cmd *exec.Cmd, stdout, stderr io.Writer) (*capture, error) {
	c := &capture{}
	outW, err := c.pipe(stdout)
	if err != nil {
		return nil, err
	}
	errW, err := c.pipe(stderr)
	if err != nil {
		outW.Close()
		c.finish(0)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	err = cmd.Start()
	outW.Close() // the child holds its own copies; ours would keep EOF away
	errW.Close()
	if err != nil {
		c.finish(0)
		return nil, err
	}
	return c, nil
}

func (c *capture) pipe(w io.Writer) (*os.File, error) {
	r, wr, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("error creating an output pipe: %w", err)
	}
	c.files = append(c.files, r)
	c.readers.Go(func() { _, _ = io.Copy(w, r) })
	return wr, nil
}

// finish waits up to wait for the output to end, then stops reading.
func (c *capture) finish(wait time.Duration) {
	done := make(chan struct{})
	go func() { c.readers.Wait(); close(done) }()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	for _, f := range c.files {
		f.Close() // interrupts a pending Read: the pipe is in the runtime poller
	}
	<-done
}
