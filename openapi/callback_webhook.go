package openapi

import (
	"encoding/json"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"
)

// CallbackBody is the body ax POSTs to a job's callback URL when a run
// ends, as the spec documents it: the fields of queue.CallbackPayload,
// which builds it (a test holds the two together).
type CallbackBody struct {
	Type         string          `json:"type" enum:"execution.ended"`
	ExecutionID  string          `json:"execution_id" format:"uuid" doc:"Also webhook-id: deduplicate on it"`
	JobID        string          `json:"job_id" format:"uuid"`
	JobName      string          `json:"job_name"`
	JobGroup     string          `json:"job_group"`
	Sequence     int64           `json:"sequence" doc:"The callback's number among its job's: 1, 2, 3… without gaps, in the order the runs ended (0 only for a callback a redelivery made for a run that ended while the job had no callback URL); also Ax-Callback-Sequence. With callback.ordered they arrive in this order"`
	Cause        string          `json:"cause" enum:"schedule,catch_up,manual,delayed,rerun,backfill,after"`
	RerunOf      string          `json:"rerun_of,omitempty" format:"uuid" doc:"With cause rerun: the run this one re-runs"`
	ScheduledFor time.Time       `json:"scheduled_for"`
	Misfired     bool            `json:"misfired"`
	State        string          `json:"state" enum:"succeeded,failed,timed_out,cancelled"`
	Timings      CallbackTimings `json:"timings"`
	Params       Params          `json:"params" doc:"The run's params, exactly as given"`
	Shards       CallbackShards  `json:"shards"`
	Result       json.RawMessage `json:"result" doc:"The one shard's result when the run has one shard (null otherwise: each shard's is under shards.items)"`
	Error        string          `json:"error,omitempty" doc:"Why the run did not succeed: its own error or cancel reason, else the first failed shard's error"`
	ErrorCode    string          `json:"error_code,omitempty" example:"exit_3" doc:"The error code of the first listed shard that ended without succeeding and has one: exit_<n>, signal_<name>, http_<status>, connect, timeout, lease_expired, or a handler's or target's own"`
}

// CallbackTimings are a run's times.
type CallbackTimings struct {
	FiredAt    time.Time  `json:"fired_at"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	DurationMS *int64     `json:"duration_ms,omitempty" doc:"From started_at to finished_at"`
}

// CallbackShards summarizes a run's shards.
type CallbackShards struct {
	Total       int             `json:"total"`
	ByState     map[string]int  `json:"by_state" doc:"Every shard, counted by state"`
	ByErrorCode map[string]int  `json:"by_error_code" doc:"Every shard that ended without succeeding and has an error code, counted by code" example:"{\"exit_3\": 2}"`
	Items       []CallbackShard `json:"items" doc:"The first shards, by index"`
	Truncated   bool            `json:"truncated" doc:"More shards than items lists"`
}

// CallbackShard is one shard's outcome.
type CallbackShard struct {
	Index          int             `json:"index"`
	Param          string          `json:"param"`
	State          string          `json:"state" enum:"succeeded,failed,timed_out,cancelled"`
	Attempts       int             `json:"attempts"`
	IdempotencyKey string          `json:"idempotency_key" doc:"The task's idempotency key: the execution id, or <execution id>:<shard index> when the run has several shards (what its Go handler, shell command and HTTP request got)"`
	Result         json.RawMessage `json:"result,omitempty"`
	Error          string          `json:"error,omitempty"`
	ErrorCode      string          `json:"error_code,omitempty" example:"signal_killed"`
	StartedAt      *time.Time      `json:"started_at,omitempty"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
}

// callbackWebhook is the name of the callback in the spec's webhooks.
const callbackWebhook = "execution.ended"

// registerCallbackWebhook documents the callback in the spec's webhooks
// (OpenAPI 3.1): the request ax makes, not one it serves.
func registerCallbackWebhook(api huma.API) {
	header := func(name, doc string) *huma.Param {
		return &huma.Param{Name: name, In: "header", Required: true, Description: doc, Schema: &huma.Schema{Type: "string"}}
	}
	oa := api.OpenAPI()
	if oa.Webhooks == nil {
		oa.Webhooks = map[string]*huma.PathItem{}
	}
	oa.Webhooks[callbackWebhook] = &huma.PathItem{Post: &huma.Operation{
		OperationID: "execution-ended", Tags: []string{"Callbacks"}, Summary: "A run ended (sent to the job's callback URL)",
		Description: "Signed per Standard Webhooks; retried after 1 s, 5 s, 30 s, 2 min and 10 min until a 2xx, " +
			"then callback_failed. The body is the same on every attempt of a delivery. " +
			"A job with callback.ordered gets its callbacks in sequence order: one is not sent until the one before is delivered or callback_failed.",
		Parameters: []*huma.Param{
			header("webhook-id", "The execution id: the same on every attempt and redelivery"),
			header("webhook-timestamp", "This attempt, Unix seconds"),
			header("webhook-signature", "v1,<base64 HMAC-SHA256 of id.timestamp.body> (two, space-separated, while a secret is rotated)"),
			header("Ax-Callback-Attempt", "1 for the first attempt of a delivery"),
			header("Ax-Callback-Sequence", "The body's sequence: the callback's number among its job's, gap-free from 1"),
		},
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {
			Schema: oa.Components.Schemas.Schema(reflect.TypeFor[CallbackBody](), true, "CallbackBody")}}},
		Responses: map[string]*huma.Response{"2XX": {Description: "Received (any other answer is retried)"}},
	}}
}
