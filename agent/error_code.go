package agent

import (
	"errors"
	"strconv"
	"strings"
	"syscall"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Error codes the agent gives on its own.
const (
	errorCodeTimeout        = axtype.ErrorCodeTimeout        // stopped at its timeout, or an HTTP call ran out of time
	errorCodeResultTooLarge = axtype.ErrorCodeResultTooLarge // the result passed maxResultBytes
	// ErrorCodeBadResult: the server refused the task's result again and
	// again; the failure it is reported as instead carries the reason.
	ErrorCodeBadResult = axtype.ErrorCodeBadResult
)

// codedError is a task's failure with its error code.
type codedError struct {
	code string
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// WithErrorCode gives a handler's error a machine-readable code, reported
// with the result beside the error's text: the task's error_code in the
// API, the callback and the metrics. A code is 1 to 64 of a-z, 0-9, '_',
// '.' and '-' (e.g. "quota_exceeded"); any other is dropped, and the task
// still fails with err. A nil err stays nil.
func WithErrorCode(code string, err error) error {
	if err == nil {
		return nil
	}
	return &codedError{code: code, err: err}
}

// errorCodeOf is the code carried by err ("" when none, or when it is not
// a valid code: one bad code must not get the whole batch of results it
// travels in refused).
func errorCodeOf(err error) string {
	var ce *codedError
	if !errors.As(err, &ce) || !axtype.ValidErrorCode(ce.code) {
		return ""
	}
	return ce.code
}

// exitErrorCode is the code of a command that exited with code: exit_<n>.
func exitErrorCode(code int) string { return "exit_" + strconv.Itoa(code) }

// signalErrorCode is the code of a command killed by sig: signal_ and the
// signal's name as Go gives it, in snake case (signal_killed for SIGKILL,
// signal_terminated for SIGTERM, signal_segmentation_fault for SIGSEGV),
// or its number when it has no name (signal_40).
func signalErrorCode(sig syscall.Signal) string {
	name := sig.String()
	if n, ok := strings.CutPrefix(name, "signal "); ok {
		name = n
	}
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '_':
			b.WriteByte('_')
		}
	}
	return truncateCode("signal_" + b.String())
}

func truncateCode(code string) string {
	return strings.TrimRight(code[:min(len(code), axtype.MaxErrorCodeLength)], "_")
}
