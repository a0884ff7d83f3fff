package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

func TestSignalErrorCodes(t *testing.T) {
	t.Parallel()
	for sig, want := range map[syscall.Signal]string{
		syscall.SIGKILL:    "signal_killed",
		syscall.SIGTERM:    "signal_terminated",
		syscall.SIGSEGV:    "signal_segmentation_fault",
		syscall.SIGUSR1:    "signal_user_defined_signal_1",
		syscall.Signal(40): "signal_40",
	} {
		require.Equal(t, want, signalErrorCode(sig), sig)
		require.True(t, axtype.ValidErrorCode(want), want)
	}
}

// The codes come from real processes: the command's own exit, and its own
// SIGKILL.
func TestShellExecutorErrorCodes(t *testing.T) {
	t.Parallel()
	for command, want := range map[string]string{
		`exit 3`:     "exit_3",
		`kill -9 $$`: "signal_killed",
		`kill $$`:    "signal_terminated",
	} {
		res, err, _ := runShell(t, context.Background(), command, time.Second)
		require.Error(t, err, command)
		require.Equal(t, want, errorCodeOf(err), command)
		r := outcome(context.Background(), LeasedTask{TaskID: "t", LeaseToken: "tok"}, res, err)
		require.Equal(t, StateFailed, r.State)
		require.Equal(t, want, r.ErrorCode, command)
	}
	_, err, _ := runShell(t, context.Background(), `true`, time.Second)
	require.NoError(t, err)
}

func TestHTTPExecutorErrorCodes(t *testing.T) {
	t.Parallel()
	srv, _ := receiver(t, http.StatusServiceUnavailable, "busy")
	_, err := runHTTP(context.Background(), httpTask(srv.URL))
	require.Equal(t, "http_503", errorCodeOf(err))

	_, err = runHTTP(context.Background(), httpTask("http://"+closedPort(t)+"/run"))
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	require.Equal(t, "connect", errorCodeOf(err))

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	slow := make(chan struct{})
	defer close(slow)
	hang := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-slow }))
	t.Cleanup(hang.Close) // after close(slow): the handler returns first
	_, err = runHTTP(ctx, httpTask(hang.URL))
	require.Equal(t, "timeout", errorCodeOf(err))
}

// closedPort is a loopback address nothing listens on: one the kernel
// just handed out and that was closed again.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

func TestOutcomeErrorCodes(t *testing.T) {
	t.Parallel()
	task := LeasedTask{TaskID: "t", LeaseToken: "tok", TimeoutSeconds: 1}

	r := outcome(context.Background(), task, nil, WithErrorCode("quota_exceeded", errors.New("over quota")))
	require.Equal(t, TaskResult{TaskID: "t", LeaseToken: "tok", State: StateFailed, Error: "over quota",
		ErrorCode: "quota_exceeded"}, r)

	r = outcome(context.Background(), task, nil, fmt.Errorf("wrapped: %w", WithErrorCode("a.b-c_1", errors.New("x"))))
	require.Equal(t, "a.b-c_1", r.ErrorCode, "a wrapped code is found")

	r = outcome(context.Background(), task, nil, WithErrorCode("Not Valid!", errors.New("bad code")))
	require.Equal(t, StateFailed, r.State)
	require.Empty(t, r.ErrorCode, "an invalid code is dropped, not sent to be refused")

	require.NoError(t, WithErrorCode("x", nil))

	timedOut, cancel := context.WithTimeoutCause(context.Background(), 0, errTimedOut)
	defer cancel()
	<-timedOut.Done()
	r = outcome(timedOut, task, nil, WithErrorCode("signal_terminated", errors.New("killed by signal terminated")))
	require.Equal(t, StateTimedOut, r.State)
	require.Equal(t, "timeout", r.ErrorCode, "a task stopped at its timeout is a timeout, whatever stopped it")

	cancelled, stop := context.WithCancelCause(context.Background())
	stop(errCancelledByServer)
	r = outcome(cancelled, task, nil, WithErrorCode("signal_terminated", errors.New("killed")))
	require.Equal(t, StateCancelled, r.State)
	require.Empty(t, r.ErrorCode, "a cancelled task has no error code: its state says it")

	r = outcome(context.Background(), task, []byte(`"`+strings.Repeat("x", maxResultBytes)+`"`), nil)
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, "result_too_large", r.ErrorCode)
}

func TestHandlerPanicErrorCode(t *testing.T) {
	t.Parallel()
	_, err := callHandler(context.Background(), func(context.Context, Task) (Result, error) { panic("boom") }, Task{})
	require.Equal(t, "handler_panic", errorCodeOf(err))
}
