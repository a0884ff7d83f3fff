package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// Execution is one fire of a job.
type Execution struct {
	ID                uuid.UUID
	JobID             uuid.UUID
	Cause             string
	ScheduledFor      time.Time
	FiredAt           time.Time
	Misfired          bool
	State             string
	Params            json.RawMessage
	ShardCount        int
	Priority          int
	StartedAt         *time.Time
	FinishedAt        *time.Time
	CancelRequestedAt *time.Time
	CancelReason      string
	Error             string // why it ended without tasks (a broadcast with no agent)
	TraceParent       string // W3C trace context handed to agents and callbacks
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// Task is one shard of an execution.
type Task struct {
	ID                uuid.UUID
	ExecutionID       uuid.UUID
	JobID             uuid.UUID
	ShardIndex        int
	ShardTotal        int
	ShardParam        string
	State             string
	Priority          int
	Attempt           int
	MaxAttempts       int
	TimeoutSeconds    int
	NotBefore         time.Time
	StartedAt         *time.Time
	FinishedAt        *time.Time
	CancelRequestedAt *time.Time
	Result            json.RawMessage
	Error             string
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// ExecutionGetByID returns one execution.
func ExecutionGetByID(ctx context.Context, e Executor, id uuid.UUID) (*Execution, error) {
	r, err := queries.ExecutionGetByID(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting execution %s: %w", id, mapErr(err))
	}
	return executionFromRow(r), nil
}

// ExecutionListParams filters and pages ExecutionList; nil matches all.
type ExecutionListParams struct {
	JobID  *uuid.UUID
	State  *string
	From   *time.Time // scheduled_for >= From
	To     *time.Time // scheduled_for < To
	Before *uuid.UUID // last id of the previous page
	Groups []string   // only runs of jobs of these groups; nil: all
	Limit  int
}

// ExecutionList returns executions newest first.
func ExecutionList(ctx context.Context, e Executor, p *ExecutionListParams) ([]*Execution, error) {
	rows, err := queries.ExecutionList(ctx, e, dbsqlc.ExecutionListParams{
		JobID: p.JobID, State: p.State, From: p.From, To: p.To, Before: p.Before, Groups: p.Groups, Max: int32(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("error listing executions: %w", mapErr(err))
	}
	out := make([]*Execution, len(rows))
	for i, r := range rows {
		out[i] = executionFromRow(r)
	}
	return out, nil
}

// TaskListByExecution returns an execution's tasks in shard order.
func TaskListByExecution(ctx context.Context, e Executor, executionID uuid.UUID) ([]*Task, error) {
	rows, err := queries.TaskListByExecution(ctx, e, executionID)
	if err != nil {
		return nil, fmt.Errorf("error listing tasks of execution %s: %w", executionID, mapErr(err))
	}
	out := make([]*Task, len(rows))
	for i, r := range rows {
		out[i] = &Task{
			ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
			ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, State: string(r.State),
			Priority: int(r.Priority), Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			TimeoutSeconds: int(r.TimeoutSeconds), NotBefore: r.NotBefore.UTC(),
			StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt),
			CancelRequestedAt: utcPtr(r.CancelRequestedAt), Result: r.Result, Error: deref(r.Error),
			CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		}
	}
	return out, nil
}

// CancelledExecution is an execution ExecutionCancel touched, with its
// state afterwards (cancelled, or still running while agents stop tasks).
type CancelledExecution struct {
	ID    uuid.UUID
	State string
}

// ExecutionCancel stops the unfinished executions among ids and of jobIDs.
func ExecutionCancel(ctx context.Context, e Executor, ids, jobIDs []uuid.UUID, reason string) ([]CancelledExecution, error) {
	rows, err := queries.ExecutionCancel(ctx, e, dbsqlc.ExecutionCancelParams{
		Ids: nonNilIDs(ids), JobIds: nonNilIDs(jobIDs), Reason: reason,
	})
	if err != nil {
		return nil, fmt.Errorf("error cancelling executions: %w", mapErr(err))
	}
	out := make([]CancelledExecution, len(rows))
	for i, r := range rows {
		out[i] = CancelledExecution{ID: r.ID, State: string(r.State)}
	}
	return out, nil
}

func executionFromRow(r dbsqlc.AxExecution) *Execution {
	return &Execution{
		ID: r.ID, JobID: r.JobID, Cause: string(r.Cause), ScheduledFor: r.ScheduledFor.UTC(),
		FiredAt: r.FiredAt.UTC(), Misfired: r.Misfired, State: string(r.State), Params: r.Params,
		ShardCount: int(r.ShardCount), Priority: int(r.Priority), StartedAt: utcPtr(r.StartedAt),
		FinishedAt: utcPtr(r.FinishedAt), CancelRequestedAt: utcPtr(r.CancelRequestedAt),
		CancelReason: deref(r.CancelReason), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Error: deref(r.Error), TraceParent: deref(r.Traceparent),
	}
}

func nonNilIDs(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}

// ExecutionHasUnfinished reports whether a job has a pending or running
// execution.
func ExecutionHasUnfinished(ctx context.Context, e Executor, jobID uuid.UUID) (bool, error) {
	v, err := queries.ExecutionHasUnfinished(ctx, e, jobID)
	if err != nil {
		return false, fmt.Errorf("error checking unfinished executions of job %s: %w", jobID, mapErr(err))
	}
	return v, nil
}

// TriggerRecordFire records a fire made through the API as the job's last.
func TriggerRecordFire(ctx context.Context, e Executor, jobID, executionID uuid.UUID, scheduledFor time.Time) error {
	err := queries.TriggerRecordFire(ctx, e, dbsqlc.TriggerRecordFireParams{
		JobID: jobID, ExecutionID: &executionID, ScheduledFor: &scheduledFor,
	})
	if err != nil {
		return fmt.Errorf("error recording fire of job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// ExecutionGroupByID returns the group of execution id's job; ErrNotFound
// when there is no such execution.
func ExecutionGroupByID(ctx context.Context, e Executor, id uuid.UUID) (string, error) {
	g, err := queries.ExecutionGroupByID(ctx, e, id)
	if err != nil {
		return "", fmt.Errorf("error getting group of execution %s: %w", id, mapErr(err))
	}
	return g, nil
}
