package axtype

import (
	"time"

	"github.com/google/uuid"
)

// QueuedHold is the not_before of the tasks of a run that waits behind an
// unfinished run of its job (concurrency policy queue): far enough never
// to come by itself, finite so that arithmetic on not_before still works.
// The release sets it back to when the run may start.
var QueuedHold = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// QueuedRun says that a run of a queue job waited (or waits) behind an
// unfinished run of that job, ax.queued_run.
type QueuedRun struct {
	ExecutionID uuid.UUID
	JobID       uuid.UUID
	// BehindID is the run it waited behind; uuid.Nil when that run had
	// ended before the wait was recorded (it was released at once).
	BehindID   uuid.UUID
	QueuedAt   time.Time
	ReleasedAt *time.Time // nil while it waits
}

// QueuedRunForget is how long a released wait stays explained: the rows
// of older ones are deleted by the sweep.
const QueuedRunForget = 30 * 24 * time.Hour

// RunLineage is how a run relates to others: what it re-runs, its
// re-runs, the backfill that made it, what it waited behind.
type RunLineage struct {
	RerunOf  *uuid.UUID  // the run this one re-runs
	Reruns   []uuid.UUID // runs that re-run this one, oldest first
	Backfill *uuid.UUID  // the backfill that made this run
	// Wait: the run waited (or waits) behind an unfinished run of its job
	// (concurrency policy queue); nil when it did not.
	Wait *QueuedRun
}
