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

// NewBackfill is a backfill to store.
type NewBackfill struct {
	ID            uuid.UUID
	JobID         uuid.UUID
	From, To      time.Time
	MaxConcurrent int
	Overlap       axtype.BackfillOverlap
	FirstTick     time.Time // the first tick at or after From (To when none)
	TicksTotal    int
	RequestKey    string // "": none; else a retry with it finds the first
}

// BackfillInsert stores b and returns its id, or the id of the job's
// backfill stored earlier with the same request key.
func BackfillInsert(ctx context.Context, e Executor, b *NewBackfill) (uuid.UUID, error) {
	var key *string
	if b.RequestKey != "" {
		key = &b.RequestKey
	}
	id, err := queries.BackfillInsert(ctx, e, dbsqlc.BackfillInsertParams{ID: b.ID, JobID: b.JobID, RangeFrom: b.From,
		RangeTo: b.To, MaxConcurrent: int32(b.MaxConcurrent), Overlap: string(b.Overlap), NextTick: b.FirstTick,
		TicksTotal: int32(b.TicksTotal), RequestKey: key})
	if err == nil {
		return id, nil
	}
	if err = mapErr(err); !errors.Is(err, axtype.ErrNotFound) || key == nil {
		return uuid.Nil, fmt.Errorf("error storing backfill of job %s: %w", b.JobID, err)
	}
	id, err = queries.BackfillGetByRequestKey(ctx, e, dbsqlc.BackfillGetByRequestKeyParams{JobID: b.JobID, RequestKey: key})
	if err != nil {
		return uuid.Nil, fmt.Errorf("error reading backfill of job %s: %w", b.JobID, mapErr(err))
	}
	return id, nil
}

// BackfillGet returns a backfill with its runs counted.
func BackfillGet(ctx context.Context, e Executor, id uuid.UUID) (*axtype.Backfill, error) {
	r, err := queries.BackfillGet(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting backfill %s: %w", id, mapErr(err))
	}
	return &axtype.Backfill{ID: r.ID, JobID: r.JobID, From: r.RangeFrom.UTC(), To: r.RangeTo.UTC(),
		MaxConcurrent: int(r.MaxConcurrent), Overlap: axtype.BackfillOverlap(r.Overlap), State: axtype.BackfillState(r.State),
		NextTick: r.NextTick.UTC(), TicksTotal: int(r.TicksTotal), TicksCreated: int(r.TicksCreated),
		TicksExisting: int(r.TicksExisting), RunsSucceeded: int(r.RunsSucceeded), RunsFailed: int(r.RunsFailed),
		RunsUnfinished: int(r.RunsUnfinished), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		FinishedAt: utcPtr(r.FinishedAt)}, nil
}

// BackfillListByJob returns the ids of a job's backfills, newest first.
func BackfillListByJob(ctx context.Context, e Executor, jobID uuid.UUID, limit int) ([]uuid.UUID, error) {
	ids, err := queries.BackfillListByJob(ctx, e, dbsqlc.BackfillListByJobParams{JobID: jobID, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("error listing backfills of job %s: %w", jobID, mapErr(err))
	}
	return ids, nil
}

// ClaimedBackfill is a running backfill a releaser holds.
type ClaimedBackfill struct {
	ID            uuid.UUID
	JobID         uuid.UUID
	To            time.Time
	MaxConcurrent int
	Overlap       axtype.BackfillOverlap
	NextTick      time.Time
	InFlight      int  // its runs not yet ended
	JobBusy       bool // the job has an unfinished run (any cause)
	ShardCount    int  // the job's shards a run
}

// BackfillClaim locks up to limit running backfills other replicas do not
// hold, until the transaction ends.
func BackfillClaim(ctx context.Context, e Executor, limit int) ([]*ClaimedBackfill, error) {
	rows, err := queries.BackfillClaim(ctx, e, int32(limit))
	if err != nil {
		return nil, fmt.Errorf("error claiming backfills: %w", mapErr(err))
	}
	out := make([]*ClaimedBackfill, len(rows))
	for i, r := range rows {
		out[i] = &ClaimedBackfill{ID: r.ID, JobID: r.JobID, To: r.RangeTo.UTC(), MaxConcurrent: int(r.MaxConcurrent),
			Overlap: axtype.BackfillOverlap(r.Overlap), NextTick: r.NextTick.UTC(), InFlight: int(r.InFlight), JobBusy: r.JobBusy,
			ShardCount: int(r.ShardCount)}
	}
	return out, nil
}

// BackfillTrigger is what enumerating a job's ticks needs, read with its
// trigger row held.
type BackfillTrigger struct {
	Kind       axtype.TriggerKind
	CronExpr   string
	Timezone   string
	NextFireAt *time.Time // the trigger's next tick: ticks before it are its past
}

// BackfillLockTrigger holds job jobID's trigger row until the transaction
// ends, as the trigger loop does while firing it: a tick released by a
// backfill and one fired by the trigger never race.
func BackfillLockTrigger(ctx context.Context, e Executor, jobID uuid.UUID) (*BackfillTrigger, error) {
	r, err := queries.BackfillLockTrigger(ctx, e, jobID)
	if err != nil {
		return nil, fmt.Errorf("error locking trigger of job %s: %w", jobID, mapErr(err))
	}
	return &BackfillTrigger{Kind: axtype.TriggerKind(r.TriggerKind), CronExpr: r.CronExpr, Timezone: r.Timezone,
		NextFireAt: utcPtr(r.NextFireAt)}, nil
}

// BackfillTicksRun returns which of ticks (ascending) job jobID has a
// scheduled, caught-up or backfilled run for, live or in history.
func BackfillTicksRun(ctx context.Context, e Executor, jobID uuid.UUID, ticks []time.Time) (map[time.Time]bool, error) {
	run := map[time.Time]bool{}
	if len(ticks) == 0 {
		return run, nil
	}
	rows, err := queries.BackfillTicksRun(ctx, e, dbsqlc.BackfillTicksRunParams{JobID: jobID, FirstTick: ticks[0],
		LastTick: ticks[len(ticks)-1], Ticks: ticks})
	if err != nil {
		return nil, fmt.Errorf("error reading runs of job %s: %w", jobID, mapErr(err))
	}
	for _, t := range rows {
		run[t.UTC()] = true
	}
	return run, nil
}

// BackfillRunInsertMany links inserted runs to backfill id.
func BackfillRunInsertMany(ctx context.Context, e Executor, id uuid.UUID, runs []axtype.InsertedExecution) error {
	if len(runs) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(runs))
	ticks := make([]time.Time, len(runs))
	for i, r := range runs {
		ids[i], ticks[i] = r.ID, r.ScheduledFor
	}
	if err := queries.BackfillRunInsertMany(ctx, e, dbsqlc.BackfillRunInsertManyParams{ExecutionIds: ids, BackfillID: id, Ticks: ticks}); err != nil {
		return fmt.Errorf("error linking runs to backfill %s: %w", id, mapErr(err))
	}
	return nil
}

// BackfillAdvanceParams moves a backfill on.
type BackfillAdvanceParams struct {
	ID       uuid.UUID
	NextTick time.Time
	Created  int  // ticks given a run by this step
	Existing int  // ticks found run already by this step
	Done     bool // every tick released and every run ended
}

// BackfillAdvance records a release step.
func BackfillAdvance(ctx context.Context, e Executor, p *BackfillAdvanceParams) error {
	err := queries.BackfillAdvance(ctx, e, dbsqlc.BackfillAdvanceParams{ID: p.ID, NextTick: p.NextTick,
		Created: int32(p.Created), Existing: int32(p.Existing), Done: p.Done})
	if err != nil {
		return fmt.Errorf("error advancing backfill %s: %w", p.ID, mapErr(err))
	}
	return nil
}

// BackfillCancel stops a running backfill and returns its unfinished
// runs (for the caller to cancel); a backfill that ended is left alone.
func BackfillCancel(ctx context.Context, e Executor, id uuid.UUID) ([]uuid.UUID, error) {
	ids, err := queries.BackfillCancel(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error cancelling backfill %s: %w", id, mapErr(err))
	}
	return ids, nil
}

// BackfillOfExecution returns the backfill that made run id; nil when a
// backfill did not.
func BackfillOfExecution(ctx context.Context, e Executor, id uuid.UUID) (*uuid.UUID, error) {
	b, err := queries.BackfillOfExecution(ctx, e, id)
	if err != nil {
		if err = mapErr(err); errors.Is(err, axtype.ErrNotFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading backfill of run %s: %w", id, err)
	}
	return &b, nil
}
