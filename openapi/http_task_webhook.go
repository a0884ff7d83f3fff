package openapi

import (
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/httptask"
)

// httpTaskWebhook is the name of the HTTP task request in the spec's
// webhooks.
const httpTaskWebhook = "http-task"

// registerHTTPTaskWebhook documents the request of a job of kind http in
// the spec's webhooks (OpenAPI 3.1): one contract, whether ax serve sends
// it (no target labels) or an agent does. Its body is httptask.Envelope,
// the type both senders build it from.
func registerHTTPTaskWebhook(api huma.API) {
	header := func(name string, required bool, doc string) *huma.Param {
		return &huma.Param{Name: name, In: "header", Required: required, Description: doc, Schema: &huma.Schema{Type: "string"}}
	}
	oa := api.OpenAPI()
	if oa.Webhooks == nil {
		oa.Webhooks = map[string]*huma.PathItem{}
	}
	oa.Webhooks[httpTaskWebhook] = &huma.PathItem{Post: &huma.Operation{
		OperationID: "http-task", Tags: []string{"HTTP tasks"},
		Summary: "One attempt of one shard of an HTTP job (sent to the job's url)",
		Description: "Sent by ax serve for a job without target labels and by an agent for a job with them: the same " +
			"request either way. Method, URL and extra headers are the job's (ax's headers win); POST is shown, GET and " +
			"HEAD carry no body. The body is this envelope as JSON, or the job's body template rendered over it. " +
			"Signed per Standard Webhooks with the job's signing secret (verify it with the receiver kit, package " +
			"queue/webhook). Redirects are not followed. 202 keeps the task running: post its result to " +
			"Ax-Completion-Url (complete-http-task) with Ax-Completion-Token before Ax-Deadline.",
		Parameters: []*huma.Param{
			header(httptask.HeaderIdempotencyKey, true, "The execution id, or <execution id>:<shard index> when the run has several shards: the same on every attempt"),
			header("webhook-id", true, "The same as Idempotency-Key"),
			header("webhook-timestamp", true, "This attempt, Unix seconds"),
			header("webhook-signature", true, "v1,<base64 HMAC-SHA256 of id.timestamp.body> under the job's signing secret (two, space-separated, while it is rotated)"),
			header(httptask.HeaderExecutionID, true, "The run"),
			header(httptask.HeaderTaskID, true, "The shard's task"),
			header(httptask.HeaderShardIndex, true, "From 0"),
			header(httptask.HeaderShardTotal, true, "Shards of the run"),
			header(httptask.HeaderAttempt, true, "1 for the first attempt"),
			header(httptask.HeaderDeadline, true, "RFC 3339: when the attempt times out"),
			header(httptask.HeaderCompletionURL, false, "Where to post the result after answering 202 (absent when ax has no public URL)"),
			header(httptask.HeaderCompletionToken, false, "The credential of that call (also the body's completion.token)"),
			header(httptask.HeaderTraceParent, false, "The run's W3C trace context"),
			header("User-Agent", true, "Who sent it: ax/<version> (http task) or ax-agent/<version> (http task)"),
		},
		RequestBody: &huma.RequestBody{Required: true, Content: map[string]*huma.MediaType{"application/json": {
			Schema: oa.Components.Schemas.Schema(reflect.TypeFor[httptask.Envelope](), true, "")}}},
		Responses: map[string]*huma.Response{
			"202":     {Description: "Accepted: the task runs on until the result is posted to the completion URL, or its deadline passes (timed out, retried per the job's policy)"},
			"2XX":     {Description: "Succeeded: the body (up to 64 KiB; JSON kept as JSON, anything else as a string) is the task's result"},
			"default": {Description: "Failed (as is no answer): retried per the job's retry policy, error code http_<status>, connect or timeout"},
		},
	}}
}
