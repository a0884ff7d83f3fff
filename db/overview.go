package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// OverviewParams steer the home page's aggregates.
type OverviewParams struct {
	Now     *time.Time // the window's end; nil: the database's now()
	Groups  []string   // only jobs of these groups; nil: all
	MaxJobs int        // how many jobs' durations (the busiest)
	MaxRows int        // how many (class, priority) rows of the queue
}

// Overview reads the last 24 hours' runs per minute and state, the
// busiest jobs' run times per hour and the pending tasks per class and
// priority (sql/queries/overview.sql).
func Overview(ctx context.Context, e Executor, p OverviewParams) (*axtype.Overview, error) {
	out := &axtype.Overview{}
	runs, err := queries.OverviewRunsPerMinute(ctx, e, dbsqlc.OverviewRunsPerMinuteParams{Now: p.Now, Groups: p.Groups})
	if err != nil {
		return nil, fmt.Errorf("error counting runs per minute: %w", mapErr(err))
	}
	for _, r := range runs {
		out.Runs = append(out.Runs, axtype.RunsInMinute{Minute: r.Minute, State: axtype.ExecutionState(r.State), Runs: r.Runs})
	}
	took, err := queries.OverviewDurations(ctx, e, dbsqlc.OverviewDurationsParams{Now: p.Now, Groups: p.Groups,
		MaxJobs: int32(p.MaxJobs)})
	if err != nil {
		return nil, fmt.Errorf("error reading run durations: %w", mapErr(err))
	}
	for _, r := range took {
		out.Durations = append(out.Durations, axtype.JobDurations{JobID: r.JobID, Group: r.GroupName, Name: r.Name,
			Hour: r.Hour, Runs: r.Runs, P50: seconds(r.P50Seconds), P95: seconds(r.P95Seconds)})
	}
	depth, err := queries.OverviewQueueDepth(ctx, e, dbsqlc.OverviewQueueDepthParams{Groups: p.Groups, MaxRows: int32(p.MaxRows)})
	if err != nil {
		return nil, fmt.Errorf("error counting pending tasks: %w", mapErr(err))
	}
	for _, r := range depth {
		out.Queue = append(out.Queue, axtype.QueueDepth{Class: r.RateClass, Priority: r.Priority, Tasks: r.Tasks})
	}
	return out, nil
}
