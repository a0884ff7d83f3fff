package axtype

import (
	"time"

	"github.com/google/uuid"
)

// Overview is what the console's home page draws: the last day's runs
// and durations and the queue as it stands, aggregated by the database.
type Overview struct {
	// Since and Until bound the window the runs and durations are of.
	Since, Until time.Time
	Runs         []RunsInMinute
	Durations    []JobDurations
	Queue        []QueueDepth
}

// RunsInMinute is how many runs fired in one minute ended (or are) in one
// state.
type RunsInMinute struct {
	Minute time.Time
	State  ExecutionState
	Runs   int64
}

// JobDurations are the median and 95th percentile run times of one job's
// runs that finished in one hour.
type JobDurations struct {
	JobID    uuid.UUID
	Group    string
	Name     string
	Hour     time.Time
	Runs     int64
	P50, P95 time.Duration
}

// QueueDepth is how many tasks wait in one rate class ("" for none) at
// one priority.
type QueueDepth struct {
	Class    string
	Priority int32
	Tasks    int64
}
