package agent

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxHTTPResultBytes caps the response body kept as a task's result.
const maxHTTPResultBytes = 64 << 10

// httpExecutor calls a URL with the task as JSON. The receiver gets
// Idempotency-Key: <execution_id>-<shard_index>, the same on every attempt
// of the task, since tasks run at least once.
type httpExecutor struct {
	client *http.Client
}

// httpTaskBody is what the called URL receives.
type httpTaskBody struct {
	ExecutionID  string          `json:"execution_id"`
	TaskID       string          `json:"task_id"`
	JobID        string          `json:"job_id"`
	ShardIndex   int             `json:"shard_index"`
	ShardTotal   int             `json:"shard_total"`
	ShardParam   string          `json:"shard_param"`
	Attempt      int             `json:"attempt"`
	ScheduledFor time.Time       `json:"scheduled_for"`
	Params       json.RawMessage `json:"params,omitempty"`
	// Body is the job's configured body: as JSON when it is JSON, else as a
	// string.
	Body json.RawMessage `json:"body,omitempty"`
}

func (e *httpExecutor) execute(ctx context.Context, t LeasedTask, _ *taskOutput, log *slog.Logger) (json.RawMessage, error) {
	req, err := newTaskRequest(ctx, t)
	if err != nil {
		return nil, err
	}
	log.DebugContext(ctx, "calling URL", "method", req.Method, "url", req.URL.Redacted())
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, WithErrorCode(httpTransportErrorCode(err), fmt.Errorf("error calling %s: %w", req.URL.Redacted(), err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxHTTPResultBytes+1))
	if err != nil {
		return nil, WithErrorCode(httpTransportErrorCode(err),
			fmt.Errorf("error reading the answer of %s: %w", req.URL.Redacted(), err))
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		status, _ := json.Marshal(map[string]int{"status": resp.StatusCode})
		return status, WithErrorCode(httpStatusErrorCode(resp.StatusCode), fmt.Errorf("%s %s answered %s: %s",
			req.Method, req.URL.Redacted(), resp.Status, strings.TrimSpace(string(truncateBytes(body, 1024)))))
	}
	return bodyResult(body), nil
}

func newTaskRequest(ctx context.Context, t LeasedTask) (*http.Request, error) {
	u, err := url.Parse(t.Executor.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("http task has no absolute http(s) URL: %q", t.Executor.URL)
	}
	body, err := json.Marshal(httpTaskBody{ExecutionID: t.ExecutionID, TaskID: t.TaskID, JobID: t.JobID,
		ShardIndex: t.ShardIndex, ShardTotal: t.ShardTotal, ShardParam: t.ShardParam, Attempt: t.Attempt,
		ScheduledFor: t.ScheduledFor, Params: t.Params, Body: jsonOrString(t.Executor.Body)})
	if err != nil {
		return nil, fmt.Errorf("error encoding the task: %w", err)
	}
	method := strings.ToUpper(cmp.Or(t.Executor.Method, http.MethodPost))
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("error building the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range t.Executor.Headers {
		req.Header.Set(k, v)
	}
	// Set last: the receiver's deduplication depends on it, whatever the
	// configured headers say.
	req.Header.Set("Idempotency-Key", fmt.Sprintf("%s-%d", t.ExecutionID, t.ShardIndex))
	if t.TraceParent != "" {
		req.Header.Set("traceparent", t.TraceParent)
	}
	return req, nil
}

// bodyResult records a response body as JSON when it is JSON, else as a
// JSON string; one cut at the size cap is a string.
func bodyResult(body []byte) json.RawMessage {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if len(body) <= maxHTTPResultBytes && json.Valid(body) {
		return json.RawMessage(body)
	}
	s, _ := json.Marshal(string(truncateBytes(body, maxHTTPResultBytes)))
	return s
}

func jsonOrString(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
