package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Server is the agent protocol as the runtime sees it: the calls an agent
// makes to ax. ClientServer implements it with the generated OpenAPI
// client; keeping the runtime on this interface keeps the generated types
// out of the scheduling logic and lets tests exercise that logic with an
// in-memory double.
//
// Implementations report a rejected or unknown agent token as an error
// wrapping ErrUnauthorized (the runtime then registers again), any other
// HTTP answer outside 2xx as a *StatusError, and everything else (network
// trouble) as a plain error, which the runtime retries.
type Server interface {
	// Register introduces the agent using a bootstrap key with scope agent.
	Register(ctx context.Context, key string, reg Registration) (Credentials, error)
	// Lease long-polls for up to req.Max tasks.
	Lease(ctx context.Context, s Session, req LeaseRequest) ([]LeasedTask, error)
	// Heartbeat renews the listed leases and reports load.
	Heartbeat(ctx context.Context, s Session, hb Heartbeat) (HeartbeatReply, error)
	// Complete reports results. A result refused for a stale lease token is
	// an outcome with status conflict, not an error, also when every result
	// was refused (HTTP 409).
	Complete(ctx context.Context, s Session, results []TaskResult) ([]ResultOutcome, error)
	// Logs appends output chunks.
	Logs(ctx context.Context, s Session, chunks []LogChunk) error
	// Release hands leases back so the tasks are pending again at once.
	Release(ctx context.Context, s Session, tasks []TaskRef) error
	// Drain tells the server the agent is draining: it routes no new
	// tasks to it, while the agent finishes or hands back what it holds.
	Drain(ctx context.Context, s Session) error
	// Deregister marks the agent offline.
	Deregister(ctx context.Context, s Session) error
}

// Session identifies a registered agent on every call after Register.
type Session struct {
	AgentID string
	Token   string
}

// Registration introduces an agent to the server.
type Registration struct {
	Name     string            `json:"name"`
	Labels   map[string]string `json:"labels,omitempty"`
	Capacity int               `json:"capacity"`
	// Weight is the share under the weighted strategy; 0 lets the server
	// choose (1).
	Weight  int    `json:"weight,omitempty"`
	Version string `json:"version,omitempty"`
	// Executors are the task kinds the agent accepts.
	Executors []string `json:"executors,omitempty"`
	// HostName and HostIP say where the agent runs; HostIP "" lets the
	// server use the address the registration came from.
	HostName string `json:"host_name,omitempty"`
	HostIP   string `json:"host_ip,omitempty"`
}

// Credentials are what a registered agent uses from then on.
type Credentials struct {
	AgentID                  string `json:"agent_id"`
	Token                    string `json:"token"`
	LeaseSeconds             int    `json:"lease_seconds"`
	HeartbeatIntervalSeconds int    `json:"heartbeat_interval_seconds"`
}

// LeaseRequest asks for up to Max tasks, waiting up to WaitSeconds (at most
// 25) for some to be ready.
type LeaseRequest struct {
	Max         int `json:"max"`
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// LeasedTask is one task handed to the agent with its fencing token.
type LeasedTask struct {
	TaskID         string          `json:"task_id"`
	ExecutionID    string          `json:"execution_id"`
	JobID          string          `json:"job_id"`
	ShardIndex     int             `json:"shard_index"`
	ShardTotal     int             `json:"shard_total"`
	ShardParam     string          `json:"shard_param"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseToken     string          `json:"lease_token"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	ScheduledFor   time.Time       `json:"scheduled_for"`
	Executor       Executor        `json:"executor"`
	Params         json.RawMessage `json:"params,omitempty"`
	// TraceParent is the run's W3C trace context, passed on to what runs.
	TraceParent string `json:"traceparent,omitempty"`
	JobName     string `json:"job_name,omitempty"`
	// Deadline is when the attempt times out by the server's clock, at
	// the earliest: an HTTP task's Ax-Deadline.
	Deadline time.Time `json:"deadline"`
	// HTTP is what an HTTP task's request needs beyond the job (nil for
	// other kinds).
	HTTP *HTTPTask `json:"http,omitempty"`
}

// HTTPTask is what the agent needs to send an HTTP task's request as ax
// serve sends an agentless one (package httptask).
type HTTPTask struct {
	// SigningSecrets are the job's (current first): the request is signed
	// with each.
	SigningSecrets SigningSecrets `json:"signing_secrets"`
	// CompletionURL is where a target that answers 202 posts the result,
	// with the lease token; "" when the server has no public URL.
	CompletionURL string `json:"completion_url,omitempty"`
}

// SigningSecrets are a job's signing secrets. They print redacted (fmt
// and slog), so a task put in a log line by mistake does not leak them.
type SigningSecrets []string

func (s SigningSecrets) String() string { return fmt.Sprintf("[%d signing secrets, redacted]", len(s)) }

// GoString is String, for %#v.
func (s SigningSecrets) GoString() string { return s.String() }

// LogValue is String, for slog.
func (s SigningSecrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Ref is the task's reference with its fencing token.
func (t LeasedTask) Ref() TaskRef { return TaskRef{TaskID: t.TaskID, LeaseToken: t.LeaseToken} }

// Executor says what a task does; Kind selects the fields that matter.
type Executor struct {
	Kind    string            `json:"kind"`
	Command string            `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Method  string            `json:"method,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	Handler string            `json:"handler,omitempty"`
}

// TaskRef names a leased task with its fencing token.
type TaskRef struct {
	TaskID     string `json:"task_id"`
	LeaseToken string `json:"lease_token"`
}

// Heartbeat renews the leases of every task the agent holds and reports its
// load.
type Heartbeat struct {
	Tasks   []TaskRef `json:"tasks"`
	Running int       `json:"running"`
	CPU     float64   `json:"cpu,omitempty"`
	Load1   float64   `json:"load1,omitempty"`
	Memory  float64   `json:"memory,omitempty"`
	// DiskFreeBytes is the free space of the agent's work disk; nil when
	// it cannot tell.
	DiskFreeBytes *int64 `json:"disk_free_bytes,omitempty"`
	Ready         bool   `json:"ready"`
}

// HeartbeatReply says which leases the agent still holds.
type HeartbeatReply struct {
	Renewed        []string  `json:"renewed"`
	Lost           []string  `json:"lost"`
	Cancel         []string  `json:"cancel"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	State          string    `json:"state"`
}

// Result states a task can be reported in.
const (
	StateSucceeded = string(axtype.TaskSucceeded)
	StateFailed    = string(axtype.TaskFailed)
	StateTimedOut  = string(axtype.TaskTimedOut) // the agent stopped it at its timeout
	StateCancelled = string(axtype.TaskCancelled)
	// StateAccepted: the target of an HTTP task answered 202. The server
	// hands the task to the target, which posts the result to the
	// completion URL; the agent is done with it.
	StateAccepted = "accepted"
)

// TaskResult is the outcome of one task.
type TaskResult struct {
	TaskID     string          `json:"task_id"`
	LeaseToken string          `json:"lease_token"`
	State      string          `json:"state"`
	Result     json.RawMessage `json:"result,omitempty"`
	Error      string          `json:"error,omitempty"`
	// ErrorCode is the failure's machine-readable reason: exit_<n>,
	// signal_<name>, http_<status>, connect, timeout, or a handler's
	// (WithErrorCode). Empty for a success.
	ErrorCode string `json:"error_code,omitempty"`
}

// Outcomes of a reported result.
const (
	OutcomeAccepted = "accepted"
	OutcomeConflict = "conflict"
)

// ResultOutcome says what the server did with one result.
type ResultOutcome struct {
	TaskID string `json:"task_id"`
	Status string `json:"status"`
}

// LogChunk is a piece of a task's output.
type LogChunk struct {
	TaskID     string `json:"task_id"`
	LeaseToken string `json:"lease_token"`
	Stream     string `json:"stream"`
	Data       string `json:"data"`
}

// ErrUnauthorized means the server refused the agent's credentials or no
// longer knows the agent: the agent must register again.
var ErrUnauthorized = errors.New("agent credentials refused")

// StatusError is an answer outside 2xx, with the RFC 9457 problem document
// the server sent when there was one.
type StatusError struct {
	Code    int
	Problem Problem
}

// Problem is an RFC 9457 problem document.
type Problem struct {
	Title  string         `json:"title"`
	Detail string         `json:"detail"`
	Errors []ProblemError `json:"errors"`
}

// ProblemError is one entry of a problem's errors: which field, and why.
type ProblemError struct {
	Location string `json:"location"`
	Message  string `json:"message"`
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("server answered %d %s", e.Code, cmp.Or(e.Problem.Title, http.StatusText(e.Code)))
	if e.Problem.Detail != "" && e.Problem.Detail != e.Problem.Title {
		msg += ": " + e.Problem.Detail
	}
	var fields []string
	for _, fe := range e.Problem.Errors {
		fields = append(fields, fe.Location+": "+fe.Message)
	}
	if len(fields) > 0 {
		msg += " (" + strings.Join(fields, "; ") + ")"
	}
	return msg
}

// Temporary reports whether the same call may succeed later: server errors,
// throttling and request timeouts.
func (e *StatusError) Temporary() bool {
	return e.Code >= 500 || e.Code == http.StatusTooManyRequests || e.Code == http.StatusRequestTimeout
}
