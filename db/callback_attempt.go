package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// callbackAttemptList returns the last max attempts of an execution's
// callback, oldest first.
func callbackAttemptList(ctx context.Context, e Executor, executionID uuid.UUID, max int) ([]axtype.CallbackAttempt, error) {
	rows, err := queries.CallbackAttemptList(ctx, e, dbsqlc.CallbackAttemptListParams{
		ExecutionID: executionID, Max: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("error listing callback attempts of execution %s: %w", executionID, mapErr(err))
	}
	var out []axtype.CallbackAttempt
	for _, a := range rows {
		out = append(out, axtype.CallbackAttempt{Delivery: int(a.Delivery), Attempt: int(a.Attempt), URL: a.Url,
			At: a.At.UTC(), StatusCode: int(deref(a.StatusCode)), Error: a.Error,
			Latency: time.Duration(a.LatencyMs * float64(time.Millisecond))})
	}
	return out, nil
}
