package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// QueuedRunHoldMany makes the fresh runs execIDs (of jobIDs, pairwise)
// wait behind their jobs' unfinished runs: their tasks are held until
// QueuedRunRelease (or the end of the run waited behind) lets them go. It
// returns the runs it made wait; one left out had a run of its job
// waiting already.
func QueuedRunHoldMany(ctx context.Context, e Executor, execIDs, jobIDs []uuid.UUID) (map[uuid.UUID]bool, error) {
	if len(execIDs) == 0 {
		return nil, nil
	}
	rows, err := queries.QueuedRunHoldMany(ctx, e, dbsqlc.QueuedRunHoldManyParams{
		ExecutionIds: execIDs, JobIds: jobIDs, Hold: axtype.QueuedHold,
	})
	if err != nil {
		return nil, fmt.Errorf("error making runs wait: %w", mapErr(err))
	}
	out := make(map[uuid.UUID]bool, len(rows))
	for _, r := range rows {
		out[r.ExecutionID] = true
	}
	return out, nil
}

// QueuedRunRelease starts the waiting runs of jobIDs whose job has no
// other unfinished run, and returns how many tasks it made leasable.
func QueuedRunRelease(ctx context.Context, e Executor, jobIDs []uuid.UUID) (int, error) {
	if len(jobIDs) == 0 {
		return 0, nil
	}
	n, err := queries.QueuedRunRelease(ctx, e, jobIDs)
	if err != nil {
		return 0, fmt.Errorf("error releasing waiting runs: %w", mapErr(err))
	}
	return int(n), nil
}

// QueuedRunWaitingJobs lists up to max jobs with a waiting run, oldest
// wait first.
func QueuedRunWaitingJobs(ctx context.Context, e Executor, max int) ([]uuid.UUID, error) {
	ids, err := queries.QueuedRunWaitingJobs(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error listing waiting runs: %w", mapErr(err))
	}
	return ids, nil
}

// QueuedRunGet returns the wait of run execID (axtype.ErrNotFound: it did
// not wait).
func QueuedRunGet(ctx context.Context, e Executor, execID uuid.UUID) (*axtype.QueuedRun, error) {
	r, err := queries.QueuedRunGet(ctx, e, execID)
	if err != nil {
		return nil, fmt.Errorf("error reading the wait of execution %s: %w", execID, mapErr(err))
	}
	out := &axtype.QueuedRun{ExecutionID: r.ExecutionID, JobID: r.JobID, QueuedAt: r.QueuedAt.UTC(), ReleasedAt: utcPtr(r.ReleasedAt)}
	if r.BehindID != nil {
		out.BehindID = *r.BehindID
	}
	return out, nil
}

// QueuedRunForget deletes up to max waits released before before.
func QueuedRunForget(ctx context.Context, e Executor, before time.Time, max int) (int64, error) {
	n, err := queries.QueuedRunForget(ctx, e, dbsqlc.QueuedRunForgetParams{Before: before, Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("error forgetting old waits: %w", mapErr(err))
	}
	return n, nil
}
