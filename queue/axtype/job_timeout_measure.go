package axtype

import "time"

// The adaptive timeout rule (TimeoutAdaptive). A fire applies it in SQL
// (TaskPlanForExecutions); Job.AdaptiveTimeout says the same in Go, to show
// it. A retry after a timeout doubles the attempt's timeout up to the
// ceiling (TaskComplete, TaskReapExpired).
const (
	// AdaptiveTimeoutFactor multiplies the P95 of the job's recent
	// successful attempts.
	AdaptiveTimeoutFactor = 3
	// AdaptiveTimeoutMinSeconds is the floor of an adaptive timeout, and
	// the least timeout_seconds (its ceiling) an adaptive job may have.
	AdaptiveTimeoutMinSeconds = 5
	// AdaptiveTimeoutSamples is how many of the latest successful attempts
	// are measured, at most.
	AdaptiveTimeoutSamples = 100
	// AdaptiveTimeoutWindow is how old a measured attempt may be.
	AdaptiveTimeoutWindow = 24 * time.Hour
	// AdaptiveTimeoutRuns is how many of the job's latest runs a
	// measure looks through for successful ones: the bound of its cost.
	AdaptiveTimeoutRuns = 1000
	// AdaptiveTimeoutMeasureMaxAge is how old a job's stored measure may
	// be before a fire measures its history again.
	AdaptiveTimeoutMeasureMaxAge = time.Minute
	// AdaptiveTimeoutMeasuresPerFire is how many jobs' histories one fire
	// statement measures at most: a measure costs a few milliseconds.
	AdaptiveTimeoutMeasuresPerFire = 20
)

// TimeoutBasis says which part of the adaptive rule decided a timeout.
type TimeoutBasis string

// Timeout bases.
const (
	TimeoutBasisNoHistory TimeoutBasis = "no_history" // no measured success: the ceiling, the start value
	TimeoutBasisP95       TimeoutBasis = "p95"        // 3 × P95, rounded up to whole seconds
	TimeoutBasisFloor     TimeoutBasis = "floor"      // 3 × P95 was under 5 s
	TimeoutBasisCeiling   TimeoutBasis = "ceiling"    // 3 × P95 was over timeout_seconds
)

// TimeoutMeasure is the last measure of an adaptive job's recent
// successful attempts (ax.job_timeout_measure), taken by a fire.
type TimeoutMeasure struct {
	Samples    int           // successful attempts measured, at most AdaptiveTimeoutSamples
	P95        time.Duration // their 95th percentile duration (nearest rank), to the millisecond; 0 without samples
	ComputedAt time.Time
}

// AdaptiveTimeout is the timeout in seconds that a new task of j gets in
// adaptive mode, with its stored measure (j.TimeoutMeasure) and its
// ceiling (j.TimeoutSeconds), and what decided it: 3 × P95 rounded up to
// whole seconds, at least AdaptiveTimeoutMinSeconds, at most the ceiling;
// the ceiling without samples.
func (j *Job) AdaptiveTimeout() (int, TimeoutBasis) {
	m, ceiling := j.TimeoutMeasure, j.TimeoutSeconds
	if m == nil || m.Samples == 0 {
		return ceiling, TimeoutBasisNoHistory
	}
	ms := AdaptiveTimeoutFactor * m.P95.Milliseconds()
	secs := (ms + 999) / 1000
	switch {
	case max(secs, AdaptiveTimeoutMinSeconds) > int64(ceiling):
		return ceiling, TimeoutBasisCeiling
	case secs < AdaptiveTimeoutMinSeconds:
		return AdaptiveTimeoutMinSeconds, TimeoutBasisFloor
	}
	return int(secs), TimeoutBasisP95
}
