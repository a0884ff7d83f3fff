package axtype

import (
	"time"

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
