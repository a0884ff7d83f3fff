package delivery

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// ParseHTTPBodyTemplate checks an HTTP job's body template, so the API can
// refuse a broken or unbounded one when the job is saved.
func ParseHTTPBodyTemplate(body string) error { return httptask.ParseBodyTemplate(body) }

// httpTaskRequest builds the signed request of one attempt of t: the
// contract of package httptask, the one agents send too.
func httpTaskRequest(ctx context.Context, t *axtype.HTTPTask, cfg HTTPTaskConfig, agent string) (*http.Request, error) {
	task, err := httpTaskOf(t, cfg.PublicURL)
	if err != nil {
		return nil, err
	}
	return httptask.NewRequest(ctx, task, agent, time.Now())
}

// httpTaskOf is t as the contract sees it.
func httpTaskOf(t *axtype.HTTPTask, publicURL string) (*httptask.Task, error) {
	secrets, err := webhook.ParseSecrets(t.Secrets...)
	if err != nil {
		return nil, fmt.Errorf("error reading the job's signing secret: %w", err)
	}
	task := &httptask.Task{TaskID: t.ID.String(), ExecutionID: t.ExecutionID.String(), JobID: t.JobID.String(),
		JobName: t.JobName, ShardIndex: t.ShardIndex, ShardTotal: t.ShardTotal, ShardParam: t.ShardParam,
		Attempt: t.Attempt, ScheduledFor: t.ScheduledFor, Deadline: t.Deadline, Params: t.Params,
		TraceParent: t.TraceParent, URL: t.Executor.URL, Method: t.Executor.Method, BodyTemplate: t.Executor.Body,
		Headers: t.Executor.Headers, Secrets: secrets}
	if task.CompletionURL = httptask.CompletionURL(publicURL, task.TaskID); task.CompletionURL != "" {
		task.CompletionToken = t.Token.String()
	}
	return task, nil
}
