package db

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// ExecutionEndSummaries returns the ended runs among ids.
func ExecutionEndSummaries(ctx context.Context, e Executor, ids []uuid.UUID) ([]axtype.ExecutionEnd, error) {
	rows, err := queries.ExecutionEndSummaries(ctx, e, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading ended executions: %w", mapErr(err))
	}
	out := make([]axtype.ExecutionEnd, 0, len(rows))
	for _, r := range rows {
		end := axtype.ExecutionEnd{ID: r.ID, JobID: r.JobID, Group: r.GroupName, Name: r.JobName, State: r.State, Cause: r.Cause,
			StartedAt: r.StartedAt, Attempt: r.Attempt, ErrorCodes: r.ErrorCodes}
		if r.FinishedAt != nil {
			end.FinishedAt = *r.FinishedAt
		}
		out = append(out, end)
	}
	return out, nil
}

// TrySessionLock takes the session advisory lock id on conn if it is
// free; it is held until the connection closes.
func TrySessionLock(ctx context.Context, conn Executor, id int64) (bool, error) {
	ok, err := queries.TrySessionLock(ctx, conn, id)
	if err != nil {
		return false, fmt.Errorf("error taking advisory lock: %w", mapErr(err))
	}
	return ok, nil
}
