package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

func delayedRunFromRow(r dbsqlc.AxDelayedRun) *axtype.DelayedRun {
	d := &axtype.DelayedRun{ID: r.ID, JobID: r.JobID, RunAt: r.RunAt.UTC(), Params: r.Params, TraceParent: r.Traceparent,
		Held: r.Held, CancelledAt: utcPtr(r.CancelledAt), CancelReason: deref(r.CancelReason), CreatedAt: r.CreatedAt.UTC()}
	if r.Priority != nil {
		p := int(*r.Priority)
		d.Priority = &p
	}
	return d
}

// DelayedRunInsertMany stores runs in one statement.
func DelayedRunInsertMany(ctx context.Context, e Executor, runs []*axtype.DelayedRun) error {
	if len(runs) == 0 {
		return nil
	}
	p := dbsqlc.DelayedRunInsertManyParams{
		Ids: make([]uuid.UUID, len(runs)), JobIds: make([]uuid.UUID, len(runs)), RunAts: make([]time.Time, len(runs)),
		Params: delayedRunParams(runs), Priorities: make([]int32, len(runs)), Traceparents: make([]string, len(runs)),
	}
	// A run without a priority takes the job's when it fires (so it follows
	// edits of the job); an int32 array carries no NULL, so a sentinel
	// outside the priority range stands for it.
	for i, r := range runs {
		p.Ids[i], p.JobIds[i], p.RunAts[i], p.Traceparents[i] = r.ID, r.JobID, r.RunAt, r.TraceParent
		p.Priorities[i] = noPriority
		if r.Priority != nil {
			p.Priorities[i] = int32(*r.Priority)
		}
	}
	if err := queries.DelayedRunInsertMany(ctx, e, p); err != nil {
		return fmt.Errorf("error storing delayed runs: %w", mapErr(err))
	}
	return nil
}

// delayedRunParams is the runs' params as one JSON array, null for a run
// without: allocated once at its size (see DelayedRunInsertMany's query).
func delayedRunParams(runs []*axtype.DelayedRun) []byte {
	size := len(runs) + 1 // brackets and commas
	for _, r := range runs {
		size += max(len(r.Params), len("null"))
	}
	out := make([]byte, 0, size)
	out = append(out, '[')
	for i, r := range runs {
		if i > 0 {
			out = append(out, ',')
		}
		if len(r.Params) == 0 {
			out = append(out, "null"...)
		} else {
			out = append(out, r.Params...)
		}
	}
	return append(out, ']')
}

// noPriority stands for "the job's priority" in DelayedRunInsertMany.
const noPriority = -1 << 31

// DelayedRunClaimDue locks up to max pending runs due by now (the
// database's when nil) plus ahead, earliest first.
func DelayedRunClaimDue(ctx context.Context, e Executor, max int, ahead time.Duration, now *time.Time) ([]*axtype.DueDelayedRun, error) {
	rows, err := queries.DelayedRunClaimDue(ctx, e, dbsqlc.DelayedRunClaimDueParams{
		Max: int32(max), AheadMs: ahead.Milliseconds(), Now: now})
	if err != nil {
		return nil, fmt.Errorf("error claiming due delayed runs: %w", mapErr(err))
	}
	out := make([]*axtype.DueDelayedRun, len(rows))
	for i, r := range rows {
		d := &axtype.DelayedRun{ID: r.ID, JobID: r.JobID, RunAt: r.RunAt.UTC(), Params: r.Params, TraceParent: r.Traceparent}
		if r.Priority != nil {
			p := int(*r.Priority)
			d.Priority = &p
		}
		out[i] = &axtype.DueDelayedRun{DelayedRun: d, ConcurrencyPolicy: axtype.ConcurrencyPolicy(r.ConcurrencyPolicy),
			MisfirePolicy: axtype.MisfirePolicy(r.MisfirePolicy), MisfireWindowSeconds: int(r.MisfireWindowSeconds),
			Paused: r.Paused, HasUnfinished: r.HasUnfinished, Now: r.DbNow.UTC(), ShardCount: int(r.ShardCount)}
	}
	return out, nil
}

// DelayedRunHold sets runs aside until their job resumes.
func DelayedRunHold(ctx context.Context, e Executor, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if err := queries.DelayedRunHold(ctx, e, ids); err != nil {
		return fmt.Errorf("error holding delayed runs: %w", mapErr(err))
	}
	return nil
}

// DelayedRunRelease makes the held runs of a resumed job due again and
// says how many there were.
func DelayedRunRelease(ctx context.Context, e Executor, jobID uuid.UUID) (int64, error) {
	n, err := queries.DelayedRunRelease(ctx, e, jobID)
	if err != nil {
		return 0, fmt.Errorf("error releasing held delayed runs: %w", mapErr(err))
	}
	return n, nil
}

// DelayedRunDeleteMany removes runs that fired or were skipped.
func DelayedRunDeleteMany(ctx context.Context, e Executor, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	if err := queries.DelayedRunDeleteMany(ctx, e, ids); err != nil {
		return fmt.Errorf("error removing fired delayed runs: %w", mapErr(err))
	}
	return nil
}

// DelayedRunCancelMany cancels the pending runs among ids, with why, and
// returns those it cancelled.
func DelayedRunCancelMany(ctx context.Context, e Executor, ids []uuid.UUID, reason string) ([]*axtype.DelayedRun, error) {
	rows, err := queries.DelayedRunCancelMany(ctx, e, dbsqlc.DelayedRunCancelManyParams{Ids: ids, Reason: &reason})
	if err != nil {
		return nil, fmt.Errorf("error cancelling delayed runs: %w", mapErr(err))
	}
	out := make([]*axtype.DelayedRun, len(rows))
	for i, r := range rows {
		out[i] = delayedRunFromRow(r)
	}
	return out, nil
}

// DelayedRunCancelByKeys cancels the pending runs created with keys by
// the API key apiKeyID, in one statement, and returns the run of each key
// it cancelled; a key left out names no pending run.
func DelayedRunCancelByKeys(ctx context.Context, e Executor, apiKeyID uuid.UUID, keys []string, reason string) (map[string]uuid.UUID, error) {
	out := make(map[string]uuid.UUID, len(keys))
	var err error
	if len(keys) == 1 { // a statement whose plan is kept (see the query)
		var rows []dbsqlc.DelayedRunCancelByKeyRow
		rows, err = queries.DelayedRunCancelByKey(ctx, e, dbsqlc.DelayedRunCancelByKeyParams{ApiKeyID: apiKeyID, Key: keys[0], Reason: &reason})
		for _, r := range rows {
			out[r.Key] = r.ID
		}
	} else {
		var rows []dbsqlc.DelayedRunCancelByKeysRow
		rows, err = queries.DelayedRunCancelByKeys(ctx, e, dbsqlc.DelayedRunCancelByKeysParams{ApiKeyID: apiKeyID, Keys: keys, Reason: &reason})
		for _, r := range rows {
			out[r.Key] = r.ID
		}
	}
	if err != nil {
		return nil, fmt.Errorf("error cancelling delayed runs by key: %w", mapErr(err))
	}
	return out, nil
}

// DelayedRunGet returns a run that has not fired (pending, held or
// cancelled); ErrNotFound otherwise.
func DelayedRunGet(ctx context.Context, e Executor, id uuid.UUID) (*axtype.DelayedRun, error) {
	r, err := queries.DelayedRunGet(ctx, e, id)
	if err != nil {
		if err = mapErr(err); errors.Is(err, axtype.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("error reading delayed run %s: %w", id, err)
	}
	return delayedRunFromRow(r), nil
}

// DelayedRunListByJob lists a job's pending runs after the (afterRunAt,
// afterID) cursor, earliest first.
func DelayedRunListByJob(ctx context.Context, e Executor, jobID uuid.UUID, afterRunAt time.Time, afterID uuid.UUID, limit int) ([]*axtype.DelayedRun, error) {
	rows, err := queries.DelayedRunListByJob(ctx, e, dbsqlc.DelayedRunListByJobParams{JobID: jobID,
		AfterRunAt: afterRunAt, AfterID: afterID, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("error listing delayed runs: %w", mapErr(err))
	}
	out := make([]*axtype.DelayedRun, len(rows))
	for i, r := range rows {
		out[i] = delayedRunFromRow(r)
	}
	return out, nil
}

// DelayedRunDeleteCancelled removes runs cancelled more than a day ago.
func DelayedRunDeleteCancelled(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.DelayedRunDeleteCancelled(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error removing cancelled delayed runs: %w", mapErr(err))
	}
	return n, nil
}
