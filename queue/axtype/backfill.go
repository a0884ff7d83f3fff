package axtype

import (
	"time"

	"github.com/google/uuid"
)

// BackfillState is where a backfill is: running until every tick in its
// range has a run and those runs ended, or cancelled.
type BackfillState string

// Backfill states.
const (
	BackfillRunning   BackfillState = "running"
	BackfillFinished  BackfillState = "finished"
	BackfillCancelled BackfillState = "cancelled"
)

// BackfillOverlap is whether a backfill's runs may run beside the job's
// other runs.
type BackfillOverlap string

// Backfill overlap policies.
const (
	BackfillOverlapAllow  BackfillOverlap = "allow"  // up to max_concurrent backfilled runs, whatever else runs
	BackfillOverlapForbid BackfillOverlap = "forbid" // a tick is released only while the job has no unfinished run
)

// Backfill is the runs of a job's ticks in a past range, released in tick
// order, at most MaxConcurrent at a time.
type Backfill struct {
	ID            uuid.UUID
	JobID         uuid.UUID
	From, To      time.Time // ticks in [From, To)
	MaxConcurrent int
	Overlap       BackfillOverlap
	State         BackfillState
	// NextTick is the first tick not yet released (To when none is left).
	NextTick time.Time
	// TicksTotal is the number of ticks in the range; TicksCreated those
	// given a run, TicksExisting those found run already.
	TicksTotal, TicksCreated, TicksExisting int
	// RunsSucceeded, RunsFailed (failed, timed out or cancelled) and
	// RunsUnfinished count the backfill's own runs.
	RunsSucceeded, RunsFailed, RunsUnfinished int
	CreatedAt, UpdatedAt                      time.Time
	FinishedAt                                *time.Time
}
