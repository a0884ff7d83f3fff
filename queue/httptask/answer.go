package httptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// MaxResultBytes is the most of a target's answer kept as the task's
// result, and the most a result posted after a 202 may hold.
const MaxResultBytes = 64 << 10

// Error codes of attempts that got no complete answer (axtype.ErrorCodeTimeout
// and axtype.ErrorCodeConnect on the server).
const (
	ErrorCodeTimeout = "timeout"
	ErrorCodeConnect = "connect"
)

// Outcome is what an answer does to its attempt.
type Outcome string

// The outcomes of an answer.
const (
	// Succeeded: a 2xx other than 202; the body is the task's result.
	Succeeded Outcome = "succeeded"
	// Accepted: a 202; the task runs on until the target posts its result
	// to the completion URL, or its deadline passes (then it timed out).
	Accepted Outcome = "accepted"
	// Failed: any other status; retried per the job's retry policy.
	Failed Outcome = "failed"
)

// Answer is what a target answered, its body cut at MaxResultBytes.
type Answer struct {
	Status    int
	Body      []byte
	Truncated bool
}

// ReadAnswer reads resp's body up to MaxResultBytes (and closes it). An
// error means the body broke off; the status stands.
func ReadAnswer(resp *http.Response) (Answer, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResultBytes+1))
	a := Answer{Status: resp.StatusCode, Truncated: len(body) > MaxResultBytes}
	a.Body = body[:min(len(body), MaxResultBytes)]
	return a, err
}

// Outcome says what the answer does to its attempt.
func (a Answer) Outcome() Outcome {
	switch {
	case a.Status == http.StatusAccepted:
		return Accepted
	case a.Status >= 200 && a.Status < 300:
		return Succeeded
	}
	return Failed
}

// Result is the body as the task's result: the JSON itself when it is
// whole JSON, else a JSON string of its text; nil when empty.
func (a Answer) Result() json.RawMessage {
	if len(strings.TrimSpace(string(a.Body))) == 0 {
		return nil
	}
	if !a.Truncated && json.Valid(a.Body) {
		return json.RawMessage(a.Body)
	}
	text, _ := json.Marshal(strings.ToValidUTF8(string(a.Body), "\uFFFD"))
	return text
}

// Error says why a failed answer failed, with the start of its body.
func (a Answer) Error() string {
	snippet := strings.ToValidUTF8(string(a.Body[:min(len(a.Body), 512)]), "\uFFFD")
	return strings.TrimSpace(fmt.Sprintf("HTTP %d %s: %s", a.Status, http.StatusText(a.Status), snippet))
}

// ErrorCode is the error code of a failed answer: http_<status>.
func (a Answer) ErrorCode() string { return "http_" + strconv.Itoa(a.Status) }

// TransportErrorCode is the error code of a request that failed without a
// complete answer: timeout when it ran out of time, else connect (refused,
// name not found, address not allowed, TLS, a redirect, or the connection
// broke).
func TransportErrorCode(err error) string {
	var netErr net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &netErr) && netErr.Timeout()) {
		return ErrorCodeTimeout
	}
	return ErrorCodeConnect
}

// ErrRedirect means a target answered with a redirect: it is not followed
// (the signed request would go elsewhere), so the attempt fails and the
// job's URL should be updated.
var ErrRedirect = errors.New("redirects are not followed; update the job's URL")

// RefuseRedirect is an http.Client's CheckRedirect that follows nothing,
// as ax serve's outbound client does.
func RefuseRedirect(req *http.Request, via []*http.Request) error {
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	return fmt.Errorf("%w: %s answered %d with Location %s", ErrRedirect, RedactURL(via[len(via)-1].URL.String()), status,
		RedactURL(req.URL.String()))
}
