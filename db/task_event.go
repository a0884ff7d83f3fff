package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/google/uuid"
)

// TaskEvent is one entry of a task's audit trail.
type TaskEvent struct {
	ID          int64
	TaskID      uuid.UUID
	ExecutionID uuid.UUID
	ShardIndex  int
	Attempt     int
	Kind        TaskEventKind // state or log
	State       TaskState
	AgentID     *uuid.UUID
	Stream      string
	Message     string
	At          time.Time
	// WorkerHost and WorkerIP are the host name and IP of the agent behind
	// a state event (lease, result, release, reaped lease), as it
	// registered; empty when unknown or for other events.
	WorkerHost, WorkerIP string
}

// TaskEventListParams selects a page of an execution's events.
type TaskEventListParams struct {
	ExecutionID uuid.UUID
	AfterID     int64         // only events after this id
	Kind        TaskEventKind // "state", "log" or "" for all
	Limit       int           // at most this many events
	// MaxBytes bounds the page's messages: events are listed while the
	// messages before them total at most MaxBytes, so the last one listed
	// may pass it (the first always comes, whatever its size).
	MaxBytes int64
}

// TaskEventListByExecution returns a page of an execution's events,
// oldest first.
func TaskEventListByExecution(ctx context.Context, e Executor, p *TaskEventListParams) ([]*TaskEvent, error) {
	rows, err := queries.TaskEventListByExecution(ctx, e, dbsqlc.TaskEventListByExecutionParams{
		ExecutionID: p.ExecutionID, AfterID: p.AfterID, Kind: nilIfEmpty(string(p.Kind)), Max: int32(p.Limit), MaxBytes: p.MaxBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("error listing events of execution %s: %w", p.ExecutionID, mapErr(err))
	}
	out := make([]*TaskEvent, len(rows))
	for i, r := range rows {
		out[i] = &TaskEvent{ID: r.ID, TaskID: r.TaskID, ExecutionID: r.ExecutionID, ShardIndex: int(r.ShardIndex),
			Attempt: int(r.Attempt), Kind: TaskEventKind(r.Kind), AgentID: r.AgentID, Stream: deref(r.Stream),
			Message: r.Message, At: r.At.UTC(), WorkerHost: r.WorkerHost, WorkerIP: r.WorkerIp}
		if r.State != nil {
			out[i].State = TaskState(*r.State)
		}
	}
	return out, nil
}
