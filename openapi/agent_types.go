package openapi

import (
	"encoding/json"
	"time"
)

// AgentRegistration introduces an agent to the server.
type AgentRegistration struct {
	Name     string            `json:"name" minLength:"1" maxLength:"200" example:"worker-17" doc:"Human name, e.g. the host name"`
	Labels   map[string]string `json:"labels,omitempty" maxProperties:"100" example:"{\"pool\":\"billing\"}" doc:"Jobs target agents by these labels: at most 100, keys of 1-100 bytes, values of at most 255"`
	Capacity int               `json:"capacity" minimum:"1" maximum:"10000" doc:"Tasks it runs at once"`
	Weight   int               `json:"weight,omitempty" minimum:"1" maximum:"1000" default:"1" doc:"Share of work under the weighted strategy"`
	Version  string            `json:"version,omitempty" maxLength:"100"`
	// Executors default to handler and http when absent: shell runs only
	// on agents that ask for it.
	Executors []string `json:"executors,omitempty" enum:"shell,http,handler" maxItems:"3" uniqueItems:"true" example:"[\"handler\",\"http\"]" doc:"Task kinds it accepts (AX_EXECUTORS); default handler and http. It is never handed a task of another kind: shell tasks need an agent that lists shell"`
	// HostName and HostIP say where the agent runs: recorded on the task
	// events of its leases and results.
	HostName string `json:"host_name,omitempty" maxLength:"255" pattern:"^[A-Za-z0-9._-]*$" example:"worker-17.example.com" doc:"Host name of the machine it runs on"`
	HostIP   string `json:"host_ip,omitempty" maxLength:"45" example:"10.0.3.17" doc:"IP of the machine (v4 or v6); default the address the server sees the registration come from"`
}

// AgentCredentials are what a registered agent uses from then on.
type AgentCredentials struct {
	AgentID                  string `json:"agent_id" format:"uuid"`
	Token                    string `json:"token" doc:"API key of this agent (scope agent), shown once; send it as Bearer on every agent call"`
	LeaseSeconds             int    `json:"lease_seconds" doc:"How long a lease lasts without a heartbeat"`
	HeartbeatIntervalSeconds int    `json:"heartbeat_interval_seconds" doc:"How often to heartbeat; an agent silent for 3 intervals is offline"`
}

// LeaseRequest asks for work, waiting for it up to WaitSeconds.
type LeaseRequest struct {
	Max         int `json:"max" minimum:"1" maximum:"1000" doc:"Most tasks to hand out"`
	WaitSeconds int `json:"wait_seconds,omitempty" minimum:"0" maximum:"25" doc:"Long-poll: wait this long for a task when none is ready"`
}

// LeasedTask is one task handed to an agent.
type LeasedTask struct {
	TaskID         string          `json:"task_id" format:"uuid"`
	ExecutionID    string          `json:"execution_id" format:"uuid" doc:"Idempotency key of the run"`
	JobID          string          `json:"job_id" format:"uuid"`
	ShardIndex     int             `json:"shard_index"`
	ShardTotal     int             `json:"shard_total"`
	ShardParam     string          `json:"shard_param"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LeaseToken     string          `json:"lease_token" format:"uuid" doc:"Fencing token: heartbeats and results must carry it"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	TimeoutSeconds int             `json:"timeout_seconds"`
	ScheduledFor   time.Time       `json:"scheduled_for"`
	Executor       JobExecutor     `json:"executor"`
	Params         json.RawMessage `json:"params" doc:"The run's params (an object)"`
	TraceParent    string          `json:"traceparent,omitempty" doc:"W3C trace context of the run: pass it on (shell: TRACEPARENT, http: traceparent header)"`
	JobName        string          `json:"job_name"`
	Deadline       time.Time       `json:"deadline" doc:"When the attempt times out at the earliest (lease time plus timeout_seconds): an HTTP task's Ax-Deadline"`
	HTTP           *LeasedHTTPTask `json:"http,omitempty" doc:"For a task of kind http: what its request needs beyond the job, to be the request ax serve would send (webhook HTTPTask)"`
}

// LeasedHTTPTask is what an agent needs to send an HTTP task's request
// exactly as ax serve sends an agentless one: signed, with its completion
// URL. Its secrets are the job's: never log them.
type LeasedHTTPTask struct {
	SigningSecrets []string `json:"signing_secrets" doc:"The job's signing secrets (whsec_…), current first, the previous one too while a rotation lasts: sign the request with each (webhook-signature)"`
	CompletionURL  string   `json:"completion_url,omitempty" doc:"Where the target posts its result after answering 202 (Ax-Completion-Url, with the lease token as Ax-Completion-Token); absent when the server has no public URL"`
}

// Leases is the answer to a lease request (empty when the wait ran out).
type Leases struct {
	Tasks []LeasedTask `json:"tasks"`
}

// TaskRef names a leased task with its fencing token.
type TaskRef struct {
	TaskID     string `json:"task_id" format:"uuid"`
	LeaseToken string `json:"lease_token" format:"uuid"`
}

// AgentHeartbeat renews the leases of every task the agent is running and
// reports its load.
type AgentHeartbeat struct {
	Tasks   []TaskRef `json:"tasks" maxItems:"10000"`
	Running int       `json:"running" minimum:"0"`
	CPU     float64   `json:"cpu,omitempty" minimum:"0" doc:"CPU utilisation 0..1"`
	Load1   float64   `json:"load1,omitempty" minimum:"0" doc:"1-minute load average per core"`
	Memory  float64   `json:"memory,omitempty" minimum:"0" doc:"Memory utilisation 0..1"`
	// DiskFreeBytes is nil when the agent cannot tell.
	DiskFreeBytes *int64 `json:"disk_free_bytes,omitempty" minimum:"0" doc:"Free bytes on the disk the agent works on"`
	Ready         *bool  `json:"ready,omitempty" doc:"False while the agent's executors are not usable; it then gets no tasks"`
}

// HeartbeatReply tells the agent which leases it still holds.
type HeartbeatReply struct {
	Renewed        []string  `json:"renewed" doc:"Task ids whose leases were renewed"`
	Lost           []string  `json:"lost" doc:"Task ids whose lease is gone (expired, reaped, or another token): stop them and do not report"`
	Cancel         []string  `json:"cancel" doc:"Task ids to stop (cancelled or timed out); report them as cancelled"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	State          string    `json:"state" enum:"active,draining,offline,quarantined" doc:"The agent's state as the server sees it"`
}

// TaskResult is the outcome of one task.
type TaskResult struct {
	TaskID     string          `json:"task_id" format:"uuid"`
	LeaseToken string          `json:"lease_token" format:"uuid"`
	State      string          `json:"state" enum:"succeeded,failed,timed_out,cancelled,accepted" doc:"timed_out: the agent stopped it at its timeout; retried like a failure. accepted: the target of an HTTP task answered 202; the task runs on, held by no agent, until the target posts its result to the completion URL (POST /v1/tasks/{id}/complete with the lease token) or its deadline passes"`
	Result     json.RawMessage `json:"result,omitempty" doc:"Any JSON the task produced"`
	Error      string          `json:"error,omitempty" maxLength:"65536"`
	ErrorCode  string          `json:"error_code,omitempty" maxLength:"64" pattern:"^[a-z0-9_.-]*$" example:"exit_3" doc:"A short machine-readable reason beside error, for a result that did not succeed: up to 64 of a-z 0-9 _ . - (agents report exit_<n>, signal_<name>, http_<status>, connect, timeout)"`
}

// CompleteRequest reports several results at once.
type CompleteRequest struct {
	Results []TaskResult `json:"results" minItems:"1" maxItems:"10000"`
}

// ResultOutcome says what happened to one reported result.
type ResultOutcome struct {
	TaskID string `json:"task_id" format:"uuid"`
	Status string `json:"status" enum:"accepted,conflict" doc:"conflict: the lease token is not current; nothing was recorded"`
	// ErrorCode is bad_result when the result was accepted as a failure
	// because Postgres cannot store what it carried, result_too_large
	// when it was larger than a result may be.
	ErrorCode string `json:"error_code,omitempty" doc:"With accepted: bad_result when the result or error could not be stored (a lone UTF-16 surrogate, NUL, invalid UTF-8, a number beyond numeric…), recorded as failed with that code and the reason and not retried; result_too_large when the result was more than 1 MiB (1,048,576 bytes), recorded as failed without it and retried as any failure"`
	Error     string `json:"error,omitempty" doc:"With error_code bad_result or result_too_large: why the result was not stored"`
}

// CompleteReply lists the outcome of each result.
type CompleteReply struct {
	Results []ResultOutcome `json:"results"`
}

// LogChunk is output of a task.
type LogChunk struct {
	TaskID     string `json:"task_id" format:"uuid"`
	LeaseToken string `json:"lease_token" format:"uuid"`
	Stream     string `json:"stream" enum:"stdout,stderr"`
	Data       string `json:"data" maxLength:"1048576"`
}

// LogRequest appends log chunks.
type LogRequest struct {
	Chunks []LogChunk `json:"chunks" minItems:"1" maxItems:"1000"`
}

// ReleaseRequest hands leases back (a draining agent's unfinished tasks):
// they are pending again at once, without using up an attempt.
type ReleaseRequest struct {
	Tasks []TaskRef `json:"tasks" maxItems:"10000"`
}
