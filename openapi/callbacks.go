package openapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// Callback is the delivery of an execution's result to its job's
// callback URL.
type Callback struct {
	State         string            `json:"state" enum:"pending,delivered,callback_failed" doc:"callback_failed: every retry failed (redeliver to try again)"`
	Delivery      int               `json:"delivery" doc:"1, then one more per redelivery"`
	NextAttemptAt *time.Time        `json:"next_attempt_at,omitempty" doc:"When the next attempt is due (pending after a failure)"`
	DeliveredAt   *time.Time        `json:"delivered_at,omitempty"`
	FailedAt      *time.Time        `json:"failed_at,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	Attempts      []CallbackAttempt `json:"attempts" doc:"Every attempt (the last 50), oldest first"`
}

// CallbackAttempt is one request made to deliver a callback.
type CallbackAttempt struct {
	Delivery   int       `json:"delivery"`
	Attempt    int       `json:"attempt" doc:"1 for the first request of a delivery"`
	At         time.Time `json:"at"`
	URL        string    `json:"url"`
	StatusCode int       `json:"status_code,omitempty" doc:"The receiver's answer; absent when none came"`
	LatencyMS  float64   `json:"latency_ms"`
	Error      string    `json:"error,omitempty" doc:"Why the attempt failed"`
}

func callbackFromDB(c *axtype.Callback) *Callback {
	if c == nil {
		return nil
	}
	out := &Callback{State: string(c.State), Delivery: c.Delivery, NextAttemptAt: c.NextAttemptAt, DeliveredAt: c.DeliveredAt,
		FailedAt: c.FailedAt, LastError: c.LastError, Attempts: make([]CallbackAttempt, len(c.History))}
	for i, a := range c.History {
		out.Attempts[i] = CallbackAttempt{Delivery: a.Delivery, Attempt: a.Attempt, At: a.At, URL: queue.RedactURL(a.URL),
			StatusCode: a.StatusCode, LatencyMS: float64(a.Latency.Microseconds()) / 1000, Error: a.Error}
	}
	return out
}

type callbackOutput struct {
	Body *Callback
}

func (h *outboundHandlers) registerCallbacks(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "redeliver-callback", Method: http.MethodPost, Path: "/v1/executions/{id}/callback/redeliver",
		Tags: []string{"Executions"}, Summary: "Deliver an execution's callback again", DefaultStatus: http.StatusAccepted,
		Description: "Starts a new delivery (with a fresh retry schedule) to the job's current callback URL, whatever " +
			"became of earlier ones: after callback_failed, or when a receiver lost a message. The webhook-id stays the " +
			"execution id, so a receiver that has the message drops the copy. 409 while the execution runs or when its job has no callback URL.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusServiceUnavailable},
	}, ScopeSubmit), h.redeliver)
}

func (h *outboundHandlers) redeliver(ctx context.Context, in *executionIDInput) (*callbackOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.execution(ctx, id); err != nil {
		return nil, err
	}
	cb, err := h.callbacks.Redeliver(ctx, id)
	switch {
	case errors.Is(err, queue.ErrExecutionNotEnded), errors.Is(err, queue.ErrNoCallbackURL):
		return nil, huma.Error409Conflict(err.Error())
	case errors.Is(err, queue.ErrNoDelivery):
		return nil, huma.Error503ServiceUnavailable(err.Error())
	case err != nil:
		return nil, executionError(err)
	}
	return &callbackOutput{Body: callbackFromDB(cb)}, nil
}
