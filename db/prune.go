package db

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PruneBatch is how many rows of each table one prune deletes at most:
// the cleanup runs every minute, so a backlog of old rows (an upgrade of
// a long-running deployment) goes at 1.4 million rows a day a table,
// each statement short.
const PruneBatch = 1000

// Pruned counts the rows one prune deleted, by table.
type Pruned struct {
	Agents, Notices, BackfillRuns, Reruns, AfterWaits int64
}

// Total is the rows deleted in all.
func (p Pruned) Total() int64 {
	return p.Agents + p.Notices + p.BackfillRuns + p.Reruns + p.AfterWaits
}

// PruneGone deletes up to max rows of each table that no partition drop
// reaches and that name only what is gone past the history horizon
// (migration 00091): agents offline since before it (with their tokens),
// notices written before it, the backfill and re-run links of runs
// fired before it and no longer kept, and the waits of jobs that run
// after other jobs for logical times before it. Each table's delete is its own
// statement; an error of one does not stop the others.
func PruneGone(ctx context.Context, e Executor, max int) (Pruned, error) {
	var p Pruned
	n := int32(max)
	agents, err1 := queries.AgentPruneGone(ctx, e, n)
	if err1 != nil {
		err1 = fmt.Errorf("error pruning gone agents: %w", mapErr(err1))
	}
	p.Agents = int64(agents)
	var err2, err3, err4, err5 error
	if p.Notices, err2 = queries.NoticePrune(ctx, e, n); err2 != nil {
		err2 = fmt.Errorf("error pruning old notices: %w", mapErr(err2))
	}
	if p.BackfillRuns, err3 = queries.BackfillRunPrune(ctx, e, n); err3 != nil {
		err3 = fmt.Errorf("error pruning backfill links of gone runs: %w", mapErr(err3))
	}
	if p.Reruns, err4 = queries.ExecutionRerunPrune(ctx, e, n); err4 != nil {
		err4 = fmt.Errorf("error pruning re-run records of gone runs: %w", mapErr(err4))
	}
	if p.AfterWaits, err5 = queries.AfterWaitPrune(ctx, e, n); err5 != nil {
		err5 = fmt.Errorf("error pruning waits of downstream jobs: %w", mapErr(err5))
	}
	return p, errors.Join(err1, err2, err3, err4, err5)
}

// HistoryHorizon is the instant before which no run is kept in history:
// what the cleanup prunes names only what is older (PruneGone).
func HistoryHorizon(ctx context.Context, e Executor) (time.Time, error) {
	t, err := queries.HistoryHorizon(ctx, e)
	if err != nil {
		return time.Time{}, fmt.Errorf("error reading the history horizon: %w", mapErr(err))
	}
	return t, nil
}
