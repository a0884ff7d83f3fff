package axtype

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Execution is one fire of a job.
type Execution struct {
	ID                uuid.UUID
	JobID             uuid.UUID
	Cause             ExecutionCause
	ScheduledFor      time.Time
	FiredAt           time.Time
	Misfired          bool
	State             ExecutionState
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
	// RetainUntil is when a finished run's history may be removed; nil
	// while it is in flight.
	RetainUntil *time.Time
	// TriggerIndex is the trigger of the job that fired a scheduled run
	// (its place in the job's list; 0 for a job with one trigger); nil
	// for runs no trigger fired, and for runs fired before it was kept.
	TriggerIndex *int
}

// CancelledExecution is an execution ExecutionCancel touched, with its
// state afterwards (cancelled, or still running while agents stop tasks).
type CancelledExecution struct {
	ID    uuid.UUID
	State ExecutionState
}

// NewExecution is a fire to record. Params nil means the job's params.
type NewExecution struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	Cause        ExecutionCause
	ScheduledFor time.Time
	Misfired     bool
	Params       json.RawMessage
	Priority     *int // nil: the job's priority
	// TraceParent is the caller's W3C trace context; "" makes one whose
	// trace id is the execution id.
	TraceParent string
	// TriggerIndex is the trigger that fired a scheduled run (its place
	// in the job's list; 0 for a job with one trigger); nil otherwise.
	TriggerIndex *int
}

// InsertedExecution is a fire that was recorded.
type InsertedExecution struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	ScheduledFor time.Time
	FiredAt      time.Time
}
