package axtype

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// DelayedRun is one run of a job at a later time (ax.delayed_run). Its ID
// becomes the execution's when it fires.
type DelayedRun struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	RunAt        time.Time
	Params       json.RawMessage // overlays the job's params; nil: the job's
	Priority     *int            // nil: the job's
	TraceParent  string
	Held         bool // came due while the job was paused; waits for resume
	CancelledAt  *time.Time
	CancelReason string
	CreatedAt    time.Time
}

// DueDelayedRun is a claimed run with what planning its fire needs.
type DueDelayedRun struct {
	*DelayedRun
	ConcurrencyPolicy    ConcurrencyPolicy
	MisfirePolicy        MisfirePolicy
	MisfireWindowSeconds int
	Paused               bool // its job is paused: hold it
	HasUnfinished        bool // the job has an unfinished execution (policies other than allow)
	Now                  time.Time
	ShardCount           int // the job's shards a run (a broadcast's: 1)
}
