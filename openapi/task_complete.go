package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue"
)

// TaskCompletion is the result of an agentless HTTP task whose target
// answered 202: the target posts it before the task's deadline with the
// completion token its request carried.
type TaskCompletion struct {
	Token  string          `json:"token" format:"uuid" doc:"The completion token of the request (Ax-Completion-Token, or completion.token in its body)"`
	State  string          `json:"state" enum:"succeeded,failed" doc:"failed is retried per the job's retry policy"`
	Result json.RawMessage `json:"result,omitempty" doc:"Any JSON: the task's result"`
	Error  string          `json:"error,omitempty" maxLength:"65536" doc:"Why it failed"`
}

// TaskCompletionReply says what the result did.
type TaskCompletionReply struct {
	TaskID string `json:"task_id" format:"uuid"`
	State  string `json:"state" enum:"succeeded,failed,pending" doc:"The task's state now: pending when a failure will be retried"`
}

type taskCompleteInput struct {
	ID   string `path:"id" format:"uuid" doc:"Task id (Ax-Task-Id of the request)"`
	Body TaskCompletion
}

type taskCompleteOutput struct {
	Body TaskCompletionReply
}

func (h *outboundHandlers) registerTaskCompletion(api huma.API) {
	huma.Register(api, huma.Operation{
		OperationID: "complete-http-task", Method: http.MethodPost, Path: "/v1/tasks/{id}/complete",
		Tags: []string{"Executions"}, Summary: "Report the result of an HTTP task that answered 202",
		Description: "For targets of HTTP jobs run by ax itself. A target that answers 202 keeps the task running; " +
			"it then posts the result here with the completion token of that request, before the task's deadline " +
			"(Ax-Deadline). The token is the credential: no API key is needed. A token that is not current " +
			"(deadline passed and the task timed out, or already used) gets 409 and changes nothing.",
		MaxBodyBytes: 8 << 20,
		Security:     []map[string][]string{},
		Errors:       []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, h.completeTask)
}

func (h *outboundHandlers) completeTask(ctx context.Context, in *taskCompleteInput) (*taskCompleteOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	token, err := uuid.Parse(in.Body.Token)
	if err != nil {
		return nil, huma.Error422UnprocessableEntity("invalid token",
			&huma.ErrorDetail{Location: "body.token", Message: "must be a UUID", Value: in.Body.Token})
	}
	state, err := h.completer.Complete(ctx, db.TaskResult{TaskRef: db.TaskRef{ID: id, Token: token},
		State: in.Body.State, Result: in.Body.Result, Error: in.Body.Error})
	switch {
	case errors.Is(err, queue.ErrUnknownHTTPTask):
		return nil, huma.Error404NotFound(err.Error())
	case errors.Is(err, queue.ErrStaleCompletion):
		return nil, huma.Error409Conflict(err.Error())
	case err != nil:
		return nil, err
	}
	return &taskCompleteOutput{Body: TaskCompletionReply{TaskID: id.String(), State: state}}, nil
}
