package axtype

import (
	"time"

	"github.com/google/uuid"
)

// ExecutionEnd describes an ended run for its log line.
type ExecutionEnd struct {
	ID         uuid.UUID
	JobID      uuid.UUID
	Group      string // "" once the job is deleted
	Name       string
	State      string
	Cause      string
	StartedAt  *time.Time // nil: it never ran (cancelled or skipped before a lease)
	FinishedAt time.Time
	Attempt    int64  // the highest attempt of its tasks
	ErrorCodes string // its tasks' error codes, comma-separated
}
