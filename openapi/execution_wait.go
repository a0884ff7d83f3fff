package openapi

import (
	"context"
	"errors"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// maxWait caps a long poll of GET /v1/executions/{id}?wait=.
const maxWait = 60 * time.Second

type executionGetInput struct {
	ID   string `path:"id" format:"uuid" doc:"Execution id"`
	Wait string `query:"wait" maxLength:"10" pattern:"^[0-9]+(ms|s|m)$" example:"30s" doc:"Long poll: answer as soon as the execution has ended, or after this long (at most 60s) with its state then"`
}

// getExecution answers GET /v1/executions/{id}: the execution with its
// tasks and its callback, once it has ended when the caller waits.
func (h *executionHandlers) getExecution(ctx context.Context, in *executionGetInput) (*executionOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	wait, err := parseWait(in.Wait)
	if err != nil {
		return nil, err
	}
	if err := h.guard.execution(ctx, id); err != nil {
		return nil, err
	}
	// A delayed run that has yet to fire answers at once: waiting for its
	// end could outlast any wait.
	if run, err := h.execs.ScheduledRun(ctx, id); err == nil {
		return &executionOutput{Body: executionFromScheduled(run)}, nil
	} else if !errors.Is(err, axtype.ErrNotFound) {
		return nil, err
	}
	if wait > 0 {
		if _, err := h.waiter.Wait(ctx, id, wait); err != nil {
			return nil, executionError(err)
		}
	}
	return h.showExecution(ctx, id)
}

func (h *executionHandlers) showExecution(ctx context.Context, id uuid.UUID) (*executionOutput, error) {
	exec, tasks, err := h.execs.Get(ctx, id)
	if err != nil {
		return nil, executionError(err)
	}
	out, err := executionFromDB(exec, tasks)
	if err != nil {
		return nil, err
	}
	cb, err := h.callbacks.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	out.Callback = callbackFromDB(cb)
	return &executionOutput{Body: out}, nil
}

func parseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d > maxWait {
		return 0, huma.Error422UnprocessableEntity("invalid wait",
			&huma.ErrorDetail{Location: "query.wait", Message: "must be a duration of at most 60s, like 30s", Value: s})
	}
	return d, nil
}
