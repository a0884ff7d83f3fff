package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// JobTimeoutMeasureGet returns the stored measure of job id's history; nil
// when it has none.
func JobTimeoutMeasureGet(ctx context.Context, e Executor, id uuid.UUID) (*axtype.TimeoutMeasure, error) {
	r, err := queries.JobTimeoutMeasureGet(ctx, e, id)
	if err != nil {
		if err = mapErr(err); errors.Is(err, axtype.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("error getting timeout measure of job %s: %w", id, err)
	}
	return timeoutMeasure(&r.Samples, r.P95Ms, &r.ComputedAt), nil
}

// timeoutMeasure makes a measure of stored columns; nil when the job has
// none (a left join's nulls).
func timeoutMeasure(samples *int32, p95ms *int64, computedAt *time.Time) *axtype.TimeoutMeasure {
	if samples == nil || computedAt == nil {
		return nil
	}
	return &axtype.TimeoutMeasure{Samples: int(*samples), P95: time.Duration(deref(p95ms)) * time.Millisecond,
		ComputedAt: computedAt.UTC()}
}
