package delivery

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/jobtemplate"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// HTTPTaskEnvelope is the JSON body of an agentless HTTP task's request
// when the job gives no body template, and (as snake_case keys) what a
// body template sees: {{.execution_id}}, {{.shard.param}}, {{json .params}}.
type HTTPTaskEnvelope struct {
	ExecutionID  string              `json:"execution_id"`
	JobID        string              `json:"job_id"`
	JobName      string              `json:"job_name"`
	TaskID       string              `json:"task_id"`
	Attempt      int                 `json:"attempt"`
	ScheduledFor time.Time           `json:"scheduled_for"`
	Deadline     time.Time           `json:"deadline"`
	Shard        HTTPTaskShard       `json:"shard"`
	Params       json.RawMessage     `json:"params"`
	Completion   *HTTPTaskCompletion `json:"completion,omitempty"`
}

// HTTPTaskShard says which part of the run a request is.
type HTTPTaskShard struct {
	Index int    `json:"index"`
	Total int    `json:"total"`
	Param string `json:"param"`
}

// HTTPTaskCompletion is how a target that answered 202 reports the result
// later: POST {"token": …, "state": …} to URL before the deadline.
type HTTPTaskCompletion struct {
	URL   string `json:"url"`
	Token string `json:"token"`
}

// httpTaskKey is the request's idempotency key and webhook-id: the
// execution id, followed by ":<shard index>" when the run has several
// shards, so each shard is its own message and every attempt of it shares
// the key.
func httpTaskKey(t *db.HTTPTask) string {
	if t.ShardTotal <= 1 {
		return t.ExecutionID.String()
	}
	return t.ExecutionID.String() + ":" + strconv.Itoa(t.ShardIndex)
}

// ParseHTTPBodyTemplate checks an HTTP job's body template, so the API can
// refuse a broken or unbounded one when the job is saved.
func ParseHTTPBodyTemplate(body string) error {
	_, err := jobtemplate.Body.Parse(body)
	return err
}

// httpTaskRequest builds the signed request of one attempt of t.
func httpTaskRequest(ctx context.Context, t *db.HTTPTask, cfg HTTPTaskConfig, agent string) (*http.Request, error) {
	exec := &t.Executor
	env := httpEnvelope(t, cfg.PublicURL)
	method := cmp.Or(exec.Method, db.DefaultHTTPMethod) // a job saved without one
	var body []byte
	if method != http.MethodGet && method != http.MethodHead {
		var err error
		if body, err = renderHTTPBody(exec.Body, env); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, exec.URL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("error building request to %s: %w", exec.URL, err)
	}
	for k, v := range exec.Headers {
		req.Header.Set(k, v)
	}
	if len(body) > 0 && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, signHTTPTask(req, t, env, body, agent)
}

func httpEnvelope(t *db.HTTPTask, publicURL string) *HTTPTaskEnvelope {
	env := &HTTPTaskEnvelope{ExecutionID: t.ExecutionID.String(), JobID: t.JobID.String(), JobName: t.JobName,
		TaskID: t.ID.String(), Attempt: t.Attempt, ScheduledFor: t.ScheduledFor, Deadline: t.Deadline,
		Shard: HTTPTaskShard{Index: t.ShardIndex, Total: t.ShardTotal, Param: t.ShardParam}, Params: t.Params}
	if publicURL != "" {
		env.Completion = &HTTPTaskCompletion{Token: t.Token.String(),
			URL: strings.TrimRight(publicURL, "/") + "/v1/tasks/" + t.ID.String() + "/complete"}
	}
	return env
}

// renderHTTPBody is the envelope as JSON, or the job's template rendered
// over it.
func renderHTTPBody(tmpl string, env *HTTPTaskEnvelope) ([]byte, error) {
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
	t, err := jobtemplate.Body.Parse(tmpl)
	if err != nil {
		return nil, fmt.Errorf("the job's body template %w", err)
	}
	return jobtemplate.Body.Execute(t, data)
}

// signHTTPTask sets ax's headers (they win over the job's own) and the
// Standard Webhooks signature.
func signHTTPTask(req *http.Request, t *db.HTTPTask, env *HTTPTaskEnvelope, body []byte, agent string) error {
	secrets, err := webhook.ParseSecrets(t.Secrets...)
	if err != nil {
		return fmt.Errorf("error reading the job's signing secret: %w", err)
	}
	key := httpTaskKey(t)
	h := req.Header
	h.Set("User-Agent", agent)
	h.Set("Idempotency-Key", key)
	h.Set("Ax-Execution-Id", env.ExecutionID)
	h.Set("Ax-Task-Id", env.TaskID)
	h.Set("Ax-Shard-Index", strconv.Itoa(t.ShardIndex))
	h.Set("Ax-Shard-Total", strconv.Itoa(t.ShardTotal))
	h.Set("Ax-Attempt", strconv.Itoa(t.Attempt))
	h.Set("Ax-Deadline", t.Deadline.Format(time.RFC3339))
	if t.TraceParent != "" {
		h.Set("traceparent", t.TraceParent)
	}
	if env.Completion != nil {
		h.Set("Ax-Completion-Url", env.Completion.URL)
		h.Set("Ax-Completion-Token", env.Completion.Token)
	}
	return webhook.Sign(h, key, time.Now(), body, secrets...)
}
