package axtype

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// AfterMode is when a job of trigger kind after fires for a logical time:
// once all its upstreams met their condition, or once any did.
type AfterMode string

// After modes.
const (
	AfterAll AfterMode = "all"
	AfterAny AfterMode = "any"
)

// AfterOn is the end an upstream's run must reach for its downstream.
type AfterOn string

// Upstream conditions.
const (
	AfterOnSuccess    AfterOn = "success"    // the run succeeded
	AfterOnFailure    AfterOn = "failure"    // the run failed or timed out
	AfterOnCompletion AfterOn = "completion" // the run ended, however
)

// MaxAfterUpstreams bounds the upstreams of one job.
const MaxAfterUpstreams = 50

// MaxAfterDownstreams bounds the jobs that run after one job: each run of
// it that ends updates the wait of each of them (about six statements a
// job) inside the statement that ends it, which ends other jobs' runs
// too. 10,000 jobs after one made every end of its runs 60,000 statements
// in a batch shared with every agent's results.
const MaxAfterDownstreams = 100

// MaxCascadeReruns bounds the re-runs one cascading re-run makes, all the
// way down (schedule.AfterFirer). A job after several upstreams of a
// cascade is re-run once per upstream that re-ran, and so is all that
// follows it: w^(depth-1) runs through layers of width w, millions from
// one call at the graph's bounds. Past it, a downstream's time is
// recorded as skipped (SkipCascadeBound) instead. Concurrent passes may
// pass it by a few.
const MaxCascadeReruns = 1000

// AfterUpstream is one job a downstream job runs after.
type AfterUpstream struct {
	JobID uuid.UUID // resolved from Job when the job is saved
	Job   string    // "group/name"
	On    AfterOn
}

// AfterUpstreamError refuses the upstreams of a job being saved: an
// unknown job, or one that would close a cycle. Index is the upstream's
// place in the list (-1: the list as a whole).
type AfterUpstreamError struct {
	Index  int
	Reason string
}

func (e *AfterUpstreamError) Error() string {
	if e.Index < 0 {
		return "trigger.upstream " + e.Reason
	}
	return fmt.Sprintf("trigger.upstream[%d] %s", e.Index, e.Reason)
}

// AfterWait is a downstream job's wait for one logical time (ax.after_wait).
type AfterWait struct {
	JobID       uuid.UUID
	LogicalTime time.Time
	State       string // waiting, ready, fired, skipped
	// Arrived maps an upstream job id to the run of it that counted.
	Arrived     map[uuid.UUID]AfterArrival
	ExecutionID *uuid.UUID // the run it made (fired)
	SkipRun     *uuid.UUID // the upstream run that made it skip
	CascadeFrom *uuid.UUID // the cascading re-run that made it ready again
}

// After wait states.
const (
	AfterWaiting = "waiting"
	AfterReady   = "ready"
	AfterFired   = "fired"
	AfterSkipped = "skipped"
)

// AfterArrival is an upstream run recorded in a wait.
type AfterArrival struct {
	ExecutionID uuid.UUID `json:"execution_id"`
	State       string    `json:"state"`
	Met         bool      `json:"met"`
}

// AfterRun is an upstream run as a downstream's params template sees it.
type AfterRun struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	Group, Name  string
	State        string
	ScheduledFor time.Time
	FinishedAt   *time.Time
	Result       json.RawMessage
}

// AfterLink is a job at one end of an edge of the job graph.
type AfterLink struct {
	JobID uuid.UUID
	Job   string // "group/name"
	On    AfterOn
	Mode  AfterMode // the downstream's mode
}
