package delivery

import (
	"context"
	"errors"
	"net"
	"strconv"

	"github.com/ax-scheduler/ax/db"
)

// statusErrorCode is the error code of an answer with status:
// http_<status>.
func statusErrorCode(status int) string { return "http_" + strconv.Itoa(status) }

// transportErrorCode is the error code of a request that failed without a
// complete answer: timeout when it ran out of time, else connect (refused,
// name not found, address not allowed, TLS, or the connection broke).
func transportErrorCode(err error) string {
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return db.ErrorCodeTimeout
	}
	return db.ErrorCodeConnect
}
