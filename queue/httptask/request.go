package httptask

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/queue/jobtemplate"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// The headers ax sets on every HTTP task request, whoever sends it,
// besides User-Agent, Content-Type (when the job sets none), traceparent
// (when the run has one) and the webhook-* signature headers.
const (
	HeaderIdempotencyKey  = "Idempotency-Key"
	HeaderExecutionID     = "Ax-Execution-Id"
	HeaderTaskID          = "Ax-Task-Id"
	HeaderShardIndex      = "Ax-Shard-Index"
	HeaderShardTotal      = "Ax-Shard-Total"
	HeaderAttempt         = "Ax-Attempt"
	HeaderDeadline        = "Ax-Deadline"
	HeaderCompletionURL   = "Ax-Completion-Url"
	HeaderCompletionToken = "Ax-Completion-Token"
	HeaderTraceParent     = "traceparent"
)

// Task is what one attempt's request is built from: the same fields
// whether ax serve or an agent sends it.
type Task struct {
	TaskID, ExecutionID, JobID, JobName string
	ShardIndex, ShardTotal              int
	ShardParam                          string
	Attempt                             int
	ScheduledFor                        time.Time
	// Deadline is when the attempt times out, by the server's clock: a
	// target that answered 202 posts its result before it.
	Deadline time.Time
	Params   json.RawMessage
	// TraceParent is the run's W3C trace context ("" when none).
	TraceParent string

	// The job's executor: URL, method (POST when empty), headers, and the
	// body template ("" sends the envelope as JSON).
	URL, Method, BodyTemplate string
	Headers                   map[string]string

	// Secrets sign the request: the job's current secret first, then the
	// previous one while a rotation lasts. At least one is needed.
	Secrets []webhook.Secret
	// CompletionURL is where a target that answers 202 posts the result
	// ("" when ax has no public URL: a 202 can then only time out), and
	// CompletionToken the credential it posts with (the lease token).
	CompletionURL, CompletionToken string
}

// Envelope is the JSON body of a request when the job gives no body
// template, and, as snake_case keys, what a body template sees:
// {{.execution_id}}, {{.shard.param}}, {{json .params}}.
type Envelope struct {
	ExecutionID  string          `json:"execution_id" format:"uuid" doc:"The run: with the shard index, the idempotency key"`
	JobID        string          `json:"job_id" format:"uuid"`
	JobName      string          `json:"job_name"`
	TaskID       string          `json:"task_id" format:"uuid" doc:"The shard's task: the {id} of its completion URL"`
	Attempt      int             `json:"attempt" minimum:"1" doc:"1 for the first attempt, counting retries"`
	ScheduledFor time.Time       `json:"scheduled_for"`
	Deadline     time.Time       `json:"deadline" doc:"When the attempt times out (also Ax-Deadline): a 202's result must be posted before it"`
	Shard        Shard           `json:"shard"`
	Params       json.RawMessage `json:"params" doc:"The run's params, exactly as given"`
	Completion   *Completion     `json:"completion,omitempty" doc:"Where and how to post the result after answering 202 (absent when ax has no public URL)"`
}

// Shard says which part of the run a request is.
type Shard struct {
	Index int    `json:"index" minimum:"0"`
	Total int    `json:"total" minimum:"1"`
	Param string `json:"param"`
}

// Completion is how a target that answered 202 reports the result later:
// POST {"token": …, "state": …} to URL before the deadline.
type Completion struct {
	URL   string `json:"url" doc:"POST /v1/tasks/{task_id}/complete on ax's public URL (also Ax-Completion-Url)"`
	Token string `json:"token" format:"uuid" doc:"The credential of that call, good for this attempt only (also Ax-Completion-Token)"`
}

// IdempotencyKey is a shard's Idempotency-Key and webhook-id: the
// execution id, followed by ":<shard index>" when the run has several
// shards, so each shard is its own message and every attempt of it shares
// the key.
func IdempotencyKey(executionID string, shardIndex, shardTotal int) string {
	if shardTotal <= 1 {
		return executionID
	}
	return executionID + ":" + strconv.Itoa(shardIndex)
}

// CompletionURL is the completion endpoint of task taskID on the API at
// publicURL, or "" without one.
func CompletionURL(publicURL, taskID string) string {
	if publicURL == "" {
		return ""
	}
	return strings.TrimRight(publicURL, "/") + "/v1/tasks/" + taskID + "/complete"
}

// ParseBodyTemplate checks a job's body template, so the API can refuse a
// broken or unbounded one when the job is saved.
func ParseBodyTemplate(body string) error {
	_, err := jobtemplate.Body.Parse(body)
	return err
}

// Envelope returns the envelope of t.
func (t *Task) Envelope() *Envelope {
	env := &Envelope{ExecutionID: t.ExecutionID, JobID: t.JobID, JobName: t.JobName, TaskID: t.TaskID,
		Attempt: t.Attempt, ScheduledFor: t.ScheduledFor.UTC(), Deadline: t.Deadline.UTC(),
		Shard: Shard{Index: t.ShardIndex, Total: t.ShardTotal, Param: t.ShardParam}, Params: t.Params}
	if t.CompletionURL != "" {
		env.Completion = &Completion{URL: t.CompletionURL, Token: t.CompletionToken}
	}
	return env
}

// NewRequest builds the signed request of t, sent at now by userAgent
// (who sends it: "ax/1.4 (http task)", "ax-agent/1.4 (http task)").
func NewRequest(ctx context.Context, t *Task, userAgent string, now time.Time) (*http.Request, error) {
	u, err := url.Parse(t.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http task has no absolute http(s) URL: %q", t.URL)
	}
	env := t.Envelope()
	method := strings.ToUpper(cmp.Or(t.Method, http.MethodPost))
	var body []byte
	if method != http.MethodGet && method != http.MethodHead {
		if body, err = renderBody(t.BodyTemplate, env); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("error building the request to %s: %w", RedactURL(u.String()), err)
	}
	for k, v := range t.Headers {
		req.Header.Set(k, v)
	}
	if len(body) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, sign(req.Header, t, env, body, userAgent, now)
}

// renderBody is the envelope as JSON, or the job's template rendered over
// it.
func renderBody(tmpl string, env *Envelope) ([]byte, error) {
	raw, err := json.Marshal(env)
	if err != nil || tmpl == "" {
		return raw, err
	}
	var data map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // params keep their exact numbers
	if err := dec.Decode(&data); err != nil {
		return nil, err
	}
	parsed, err := jobtemplate.Body.Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("the job's body template %w", err)
	}
	return jobtemplate.Body.Execute(parsed, data)
}

// ErrNoSecret means a task came without its job's signing secret: its
// request cannot be signed, so it is not sent.
var ErrNoSecret = errors.New("the job's signing secret is missing: the request cannot be signed")

// sign sets ax's headers (they win over the job's own) and the Standard
// Webhooks signature.
func sign(h http.Header, t *Task, env *Envelope, body []byte, userAgent string, now time.Time) error {
	if len(t.Secrets) == 0 {
		return ErrNoSecret
	}
	key := IdempotencyKey(t.ExecutionID, t.ShardIndex, t.ShardTotal)
	h.Set("User-Agent", userAgent)
	h.Set(HeaderIdempotencyKey, key)
	h.Set(HeaderExecutionID, t.ExecutionID)
	h.Set(HeaderTaskID, t.TaskID)
	h.Set(HeaderShardIndex, strconv.Itoa(t.ShardIndex))
	h.Set(HeaderShardTotal, strconv.Itoa(t.ShardTotal))
	h.Set(HeaderAttempt, strconv.Itoa(t.Attempt))
	h.Set(HeaderDeadline, env.Deadline.Format(time.RFC3339))
	h.Del(HeaderTraceParent)
	if t.TraceParent != "" {
		h.Set(HeaderTraceParent, t.TraceParent)
	}
	h.Del(HeaderCompletionURL)
	h.Del(HeaderCompletionToken)
	if env.Completion != nil {
		h.Set(HeaderCompletionURL, env.Completion.URL)
		h.Set(HeaderCompletionToken, env.Completion.Token)
	}
	if err := webhook.Sign(h, key, now, body, t.Secrets...); err != nil {
		return fmt.Errorf("error signing the request: %w", err)
	}
	return nil
}
