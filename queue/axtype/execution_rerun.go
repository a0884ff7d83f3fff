package axtype

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// RerunShards chooses which shards of a run its re-run runs again.
type RerunShards string

// Re-run shard choices.
const (
	RerunAll    RerunShards = "all"    // every shard
	RerunFailed RerunShards = "failed" // the shards that did not succeed
)

// ErrNothingToRerun means a re-run of only the failed shards found every
// shard succeeded.
var ErrNothingToRerun = errors.New("every shard of the run succeeded: nothing to re-run")

// RerunCandidate is a run a bulk re-run selected.
type RerunCandidate struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	State        ExecutionState
	ScheduledFor time.Time
}
