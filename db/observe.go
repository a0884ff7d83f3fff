package db

import (
	"context"
	"fmt"
	"time"
)

// Backlog is the ready pending tasks of one rate class ("" for none) and
// priority.
type Backlog struct {
	Class      string
	Priority   int
	Depth      int64
	OldestWait time.Duration
}

// TaskCountBacklog returns the ready backlog by class and priority.
func TaskCountBacklog(ctx context.Context, e Executor) ([]Backlog, error) {
	rows, err := queries.TaskCountBacklog(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading the backlog: %w", mapErr(err))
	}
	out := make([]Backlog, len(rows))
	for i, r := range rows {
		out[i] = Backlog{Class: r.Class, Priority: int(r.Priority), Depth: r.Depth,
			OldestWait: time.Duration(r.OldestSeconds * float64(time.Second))}
	}
	return out, nil
}

// AgentCount is how many agents share a state, readiness and pool label.
type AgentCount struct {
	State  string
	Ready  bool
	Pool   string
	Agents int64
}

// AgentCountByState counts agents by state, readiness and pool; pools that
// jobs target but no agent serves come with no rows, listed in pools.
func AgentCountByState(ctx context.Context, e Executor) (counts []AgentCount, pools []string, err error) {
	rows, err := queries.AgentCountByState(ctx, e)
	if err != nil {
		return nil, nil, fmt.Errorf("error counting agents: %w", mapErr(err))
	}
	for _, r := range rows {
		counts = append(counts, AgentCount{State: r.State, Ready: r.Ready, Pool: r.Pool, Agents: r.Agents})
	}
	if pools, err = queries.JobListTargetedPools(ctx, e); err != nil {
		return nil, nil, fmt.Errorf("error listing targeted pools: %w", mapErr(err))
	}
	return counts, pools, nil
}

// FailingJob is a job with failed runs in the observed window.
type FailingJob struct {
	Name, Group, Owner  string
	Finished, Failed    int64 // runs that ended in the window, and failed ones
	ConsecutiveFailures int64 // latest runs in a row that failed
}

// JobListFailing returns jobs with failures within window.
func JobListFailing(ctx context.Context, e Executor, window time.Duration) ([]FailingJob, error) {
	rows, err := queries.JobListFailing(ctx, e, window.Seconds())
	if err != nil {
		return nil, fmt.Errorf("error reading failing jobs: %w", mapErr(err))
	}
	out := make([]FailingJob, len(rows))
	for i, r := range rows {
		out[i] = FailingJob{Name: r.Name, Group: r.GroupName, Owner: r.Owner, Finished: r.Finished,
			Failed: r.Failed, ConsecutiveFailures: r.ConsecutiveFailures}
	}
	return out, nil
}

// Overdue is the state of triggers that should have fired.
type Overdue struct {
	Late    int64         // unpaused triggers late by more than the threshold
	Longest time.Duration // how late the latest of all due triggers is
	// SetAside counts the jobs the trigger loop stopped firing because a
	// fire of them failed (not counted as late).
	SetAside int64
}

// TriggerCountOverdue reads overdue triggers; late is the threshold.
func TriggerCountOverdue(ctx context.Context, e Executor, late time.Duration) (Overdue, error) {
	r, err := queries.TriggerCountOverdue(ctx, e, late.Seconds())
	if err != nil {
		return Overdue{}, fmt.Errorf("error reading overdue triggers: %w", mapErr(err))
	}
	return Overdue{Late: r.Overdue, Longest: time.Duration(r.MaxOverdueSeconds * float64(time.Second)),
		SetAside: r.SetAside}, nil
}

// Breaker is the circuit breaker state of one callback host.
type Breaker struct {
	Host, State string // closed, open or half_open
}

// CallbackBreakerListRecent returns breakers not closed or changed within a day.
func CallbackBreakerListRecent(ctx context.Context, e Executor) ([]Breaker, error) {
	rows, err := queries.CallbackBreakerListRecent(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading callback breakers: %w", mapErr(err))
	}
	out := make([]Breaker, len(rows))
	for i, r := range rows {
		out[i] = Breaker{Host: r.Host, State: r.State}
	}
	return out, nil
}
