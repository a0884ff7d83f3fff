package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// maxHTTPResultBytes caps the response body kept as a task's result.
const maxHTTPResultBytes = httptask.MaxResultBytes

// httpExecutor sends an HTTP task's request: the one ax serve sends for
// a job without target labels (package httptask), signed with the job's
// secret, so a target cannot tell who sent it but by User-Agent.
type httpExecutor struct {
	client    *http.Client
	userAgent string
}

// newHTTPExecutor returns an executor sending with client, which follows
// no redirect, as ax serve's does.
func newHTTPExecutor(client *http.Client, version string) *httpExecutor {
	c := *client
	c.CheckRedirect = httptask.RefuseRedirect
	return &httpExecutor{client: &c, userAgent: "ax-agent/" + version + " (http task)"}
}

// errAccepted is the outcome of a 202: the target posts the result to the
// completion URL; the agent reports the task as accepted.
var errAccepted = errors.New("accepted by the target (202): its result goes to the completion URL")

func (e *httpExecutor) execute(ctx context.Context, t LeasedTask, _ *taskOutput, log *slog.Logger) (json.RawMessage, error) {
	task, err := contractTask(t)
	if err != nil {
		return nil, err
	}
	req, err := httptask.NewRequest(ctx, task, e.userAgent, time.Now())
	if err != nil {
		return nil, err
	}
	log.DebugContext(ctx, "calling URL", "method", req.Method, "url", httptask.RedactURL(req.URL.String()))
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, WithErrorCode(httptask.TransportErrorCode(err), fmt.Errorf("error calling %s: %w", httptask.RedactURL(req.URL.String()), httptask.RedactURLError(err)))
	}
	answer, err := httptask.ReadAnswer(resp)
	if err != nil {
		return nil, WithErrorCode(httptask.TransportErrorCode(err),
			fmt.Errorf("error reading the answer of %s: %w", httptask.RedactURL(req.URL.String()), httptask.RedactURLError(err)))
	}
	switch answer.Outcome() {
	case httptask.Accepted:
		return nil, errAccepted
	case httptask.Succeeded:
		return answer.Result(), nil
	}
	return nil, WithErrorCode(answer.ErrorCode(), errors.New(answer.Error()))
}

// contractTask is t as package httptask sees it.
func contractTask(t LeasedTask) (*httptask.Task, error) {
	task := &httptask.Task{TaskID: t.TaskID, ExecutionID: t.ExecutionID, JobID: t.JobID, JobName: t.JobName,
		ShardIndex: t.ShardIndex, ShardTotal: t.ShardTotal, ShardParam: t.ShardParam, Attempt: t.Attempt,
		ScheduledFor: t.ScheduledFor, Deadline: t.Deadline, Params: t.Params, TraceParent: t.TraceParent,
		URL: t.Executor.URL, Method: t.Executor.Method, BodyTemplate: t.Executor.Body, Headers: t.Executor.Headers}
	if t.HTTP == nil {
		return nil, fmt.Errorf("%w (the server sent no http part with the task: is it older than this agent?)", httptask.ErrNoSecret)
	}
	secrets, err := webhook.ParseSecrets(t.HTTP.SigningSecrets...)
	if err != nil {
		return nil, fmt.Errorf("error reading the job's signing secret: %w", err)
	}
	task.Secrets = secrets
	if t.HTTP.CompletionURL != "" {
		task.CompletionURL, task.CompletionToken = t.HTTP.CompletionURL, t.LeaseToken
	}
	return task, nil
}
