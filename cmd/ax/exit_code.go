package main

import (
	"errors"
	"fmt"
	"net/http"
)

// Exit codes of ax, one per class of error, so that scripts can tell a
// typo from a missing job from a server that is down. openapi/guide/cli.md
// documents them.
const (
	exitOK       = 0
	exitError    = 1 // anything else, e.g. `ax exec logs -f` on a run that failed
	exitUsage    = 2 // unknown command or flag, wrong arguments
	exitNotFound = 3 // 404, or no job has that name
	exitConflict = 4 // 409 or 412: the state does not allow it (a managed job, a name taken)
	exitServer   = 5 // 5xx, 429, or the server could not be reached
	exitDenied   = 6 // 401 or 403: no key, a wrong key, a missing scope
	exitRejected = 7 // 400, 413 or 422: the server refused the input, naming the field
)

// exitError carries the exit code of an error.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string { return e.err.Error() }
func (e *codedError) Unwrap() error { return e.err }

// usageErr marks err as a usage error (exit 2).
func usageErr(err error) error { return &codedError{code: exitUsage, err: err} }

// usageErrorf is a usage error (exit 2).
func usageErrorf(format string, args ...any) error {
	return usageErr(fmt.Errorf(format, args...))
}

// notFoundErrorf is a not-found error (exit 3).
func notFoundErrorf(format string, args ...any) error {
	return &codedError{code: exitNotFound, err: fmt.Errorf(format, args...)}
}

// unreachable wraps an error of the HTTP client: the server could not be
// reached or did not answer (exit 5).
func unreachable(err error) error {
	return &codedError{code: exitServer, err: fmt.Errorf("error calling ax: %w", err)}
}

// statusExitCode maps an HTTP status to its exit code.
func statusExitCode(status int) int {
	switch {
	case status == http.StatusNotFound:
		return exitNotFound
	case status == http.StatusConflict || status == http.StatusPreconditionFailed:
		return exitConflict
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return exitDenied
	case status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge ||
		status == http.StatusUnprocessableEntity:
		return exitRejected
	case status >= 500 || status == http.StatusTooManyRequests:
		return exitServer
	}
	return exitError
}

// exitCode is the process's exit code for err.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	if c, ok := errorsAs[*codedError](err); ok {
		return c.code
	}
	if a, ok := errorsAs[*apiErr](err); ok {
		return statusExitCode(a.status)
	}
	if errors.Is(err, errNoAPIKey) {
		return exitDenied
	}
	return exitError
}
