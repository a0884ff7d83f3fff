package db

import (
	"context"
	"fmt"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// TaskEventListParams selects a page of an execution's events.
type TaskEventListParams struct {
	ExecutionID uuid.UUID
	AfterID     int64                // only events after this id
	Kind        axtype.TaskEventKind // "state", "log" or "" for all
	Limit       int                  // at most this many events
	// MaxBytes bounds the page's messages: events are listed while the
	// messages before them total at most MaxBytes, so the last one listed
	// may pass it (the first always comes, whatever its size).
	MaxBytes int64
}

// TaskEventListByExecution returns a page of an execution's events,
// oldest first.
func TaskEventListByExecution(ctx context.Context, e Executor, p *TaskEventListParams) ([]*axtype.TaskEvent, error) {
	rows, err := queries.TaskEventListByExecution(ctx, e, dbsqlc.TaskEventListByExecutionParams{
		ExecutionID: p.ExecutionID, AfterID: p.AfterID, Kind: nilIfEmpty(string(p.Kind)), Max: int32(p.Limit), MaxBytes: p.MaxBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("error listing events of execution %s: %w", p.ExecutionID, mapErr(err))
	}
	out := make([]*axtype.TaskEvent, len(rows))
	for i, r := range rows {
		out[i] = &axtype.TaskEvent{ID: r.ID, TaskID: r.TaskID, ExecutionID: r.ExecutionID, ShardIndex: int(r.ShardIndex),
			Attempt: int(r.Attempt), Kind: axtype.TaskEventKind(r.Kind), AgentID: r.AgentID, Stream: deref(r.Stream),
			Message: r.Message, At: r.At.UTC(), WorkerHost: r.WorkerHost, WorkerIP: r.WorkerIp}
		if r.State != nil {
			out[i].State = axtype.TaskState(*r.State)
		}
	}
	return out, nil
}
