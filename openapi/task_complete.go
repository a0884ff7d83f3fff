package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// TaskCompletion is the result of an agentless HTTP task whose target
// answered 202: the target posts it before the task's deadline with the
// completion token its request carried.
type TaskCompletion struct {
	Token  string          `json:"token" format:"uuid" doc:"The completion token of the request (Ax-Completion-Token, or completion.token in its body)"`
	State  string          `json:"state" enum:"succeeded,failed" doc:"failed is retried per the job's retry policy"`
	Result json.RawMessage `json:"result,omitempty" doc:"Any JSON: the task's result"`
	Error  string          `json:"error,omitempty" maxLength:"65536" doc:"Why it failed"`
	// ErrorCode is the failure's machine-readable reason.
	ErrorCode string `json:"error_code,omitempty" maxLength:"64" pattern:"^[a-z0-9_.-]*$" example:"quota_exceeded" doc:"With state failed: a short machine-readable reason beside error, up to 64 of a-z 0-9 _ . -"`
}

// TaskCompletionReply says what the result did.
type TaskCompletionReply struct {
	TaskID string `json:"task_id" format:"uuid"`
	State  string `json:"state" enum:"succeeded,failed,pending" doc:"The task's state now: pending when a failure will be retried"`
}

// HeaderCompletionToken carries the completion token of an agentless HTTP
// task: on ax's request to the target, and on the result it posts back.
const HeaderCompletionToken = "Ax-Completion-Token"

// completionBodyLimit caps a posted result: the result ax keeps
// (queue.MaxHTTPResultBytes), an error of 65,536 characters, and the rest.
const completionBodyLimit = queue.MaxHTTPResultBytes + 72<<10

type taskCompleteInput struct {
	ID    string `path:"id" format:"uuid" doc:"Task id (Ax-Task-Id of the request)"`
	Token string `header:"Ax-Completion-Token" format:"uuid" doc:"The completion token, checked before the body is read; when given, body.token must be the same"`
	Body  TaskCompletion
}

type taskCompleteOutput struct {
	Body TaskCompletionReply
}

func (h *outboundHandlers) registerTaskCompletion(api huma.API) {
	register(api, checksOwnValues(huma.Operation{
		OperationID: "complete-http-task", Method: http.MethodPost, Path: "/v1/tasks/{id}/complete",
		Tags: []string{"Executions"}, Summary: "Report the result of an HTTP task that answered 202",
		Description: "For targets of HTTP jobs run by ax itself. A target that answers 202 keeps the task running; " +
			"it then posts the result here with the completion token of that request, before the task's deadline " +
			"(Ax-Deadline). The token is the credential: no API key is needed. A token that is not current " +
			"(deadline passed and the task timed out, or already used) gets 409 and changes nothing. " +
			"Send it in the Ax-Completion-Token header too: it is then checked before the body is read. " +
			"The body is at most 136 KiB, its result at most 64 KiB.",
		MaxBodyBytes: completionBodyLimit,
		Security:     []map[string][]string{},
		Errors:       []int{http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity},
		// The token is checked before the body is read; a result Postgres
		// cannot store fails the task as bad_result (db.TaskComplete).
		Middlewares: huma.Middlewares{h.checkCompletionToken},
	}), h.completeTask)
}

// checkCompletionToken refuses, before the body is read, a result whose
// Ax-Completion-Token header is not the task's current token: this
// endpoint takes no API key, and a bad token should cost one primary-key
// read, not the decoding of a body.
func (h *outboundHandlers) checkCompletionToken(ctx huma.Context, next func(huma.Context)) {
	header := ctx.Header(HeaderCompletionToken)
	if header == "" {
		next(ctx) // the token is in the body alone, which is small
		return
	}
	id, errID := uuid.Parse(ctx.Param("id"))
	token, errToken := uuid.Parse(header)
	if errID != nil || errToken != nil {
		next(ctx) // huma's validation names the bad parameter
		return
	}
	err := h.completer.CheckToken(ctx.Context(), id, token)
	switch {
	case errors.Is(err, queue.ErrUnknownHTTPTask):
		_ = huma.WriteErr(h.api, ctx, http.StatusNotFound, err.Error())
	case errors.Is(err, queue.ErrStaleCompletion):
		_ = huma.WriteErr(h.api, ctx, http.StatusConflict, err.Error())
	case err != nil:
		h.logger.ErrorContext(ctx.Context(), "error checking a completion token", "task_id", id, "error", err)
		_ = huma.WriteErr(h.api, ctx, http.StatusServiceUnavailable, "cannot check the completion token right now")
	default:
		next(ctx)
	}
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
	if in.Token != "" && !strings.EqualFold(in.Token, in.Body.Token) {
		return nil, huma.Error422UnprocessableEntity("two tokens",
			&huma.ErrorDetail{Location: "body.token", Message: "must be the token of the Ax-Completion-Token header", Value: in.Body.Token})
	}
	if len(in.Body.Result) > queue.MaxHTTPResultBytes {
		return nil, huma.Error422UnprocessableEntity("result too large", &huma.ErrorDetail{Location: "body.result",
			Message: fmt.Sprintf("is %d bytes; a result may be %d", len(in.Body.Result), queue.MaxHTTPResultBytes)})
	}
	if err := checkErrorCode("body.error_code", in.Body.State, in.Body.ErrorCode); err != nil {
		return nil, err
	}
	state, err := h.completer.Complete(ctx, axtype.TaskResult{TaskRef: axtype.TaskRef{ID: id, Token: token},
		State: axtype.TaskState(in.Body.State), Result: in.Body.Result, Error: in.Body.Error, ErrorCode: in.Body.ErrorCode})
	switch {
	case errors.Is(err, queue.ErrUnknownHTTPTask):
		return nil, huma.Error404NotFound(err.Error())
	case errors.Is(err, queue.ErrStaleCompletion):
		return nil, huma.Error409Conflict(err.Error())
	case err != nil:
		return nil, err
	}
	return &taskCompleteOutput{Body: TaskCompletionReply{TaskID: id.String(), State: string(state)}}, nil
}
