package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// SkippedFireInsertMany records skipped ticks.
func SkippedFireInsertMany(ctx context.Context, e Executor, skips []*axtype.SkippedFire) error {
	if len(skips) == 0 {
		return nil
	}
	p := dbsqlc.SkippedFireInsertManyParams{}
	for _, s := range skips {
		p.JobIds = append(p.JobIds, s.JobID)
		p.Reasons = append(p.Reasons, string(s.Reason))
		p.FirstTicks = append(p.FirstTicks, s.FirstTick)
		p.LastTicks = append(p.LastTicks, s.LastTick)
		p.TickCounts = append(p.TickCounts, int32(s.TickCount))
		p.Details = append(p.Details, s.Detail)
	}
	if err := queries.SkippedFireInsertMany(ctx, e, p); err != nil {
		return fmt.Errorf("error recording skipped fires: %w", mapErr(err))
	}
	return nil
}

// SkippedFireListByJob returns the newest skipped ticks of a job.
func SkippedFireListByJob(ctx context.Context, e Executor, jobID uuid.UUID, limit int) ([]*axtype.SkippedFire, error) {
	rows, err := queries.SkippedFireListByJob(ctx, e, dbsqlc.SkippedFireListByJobParams{JobID: jobID, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("error listing skipped fires: %w", mapErr(err))
	}
	out := make([]*axtype.SkippedFire, len(rows))
	for i, r := range rows {
		out[i] = &axtype.SkippedFire{JobID: r.JobID, Reason: axtype.SkipReason(r.Reason), FirstTick: r.FirstTick.UTC(),
			LastTick: r.LastTick.UTC(), TickCount: int(deref(r.TickCount)), Detail: r.Detail, RecordedAt: r.RecordedAt.UTC()}
	}
	return out, nil
}

// SkippedFireCovering returns the newest skip record of jobID whose ticks
// span at; ErrNotFound when there is none.
func SkippedFireCovering(ctx context.Context, e Executor, jobID uuid.UUID, at time.Time) (*axtype.SkippedFire, error) {
	r, err := queries.SkippedFireCovering(ctx, e, dbsqlc.SkippedFireCoveringParams{JobID: jobID, At: at})
	if err != nil {
		return nil, fmt.Errorf("error getting the skip of job %s at %s: %w", jobID, at.Format(time.RFC3339), mapErr(err))
	}
	return &axtype.SkippedFire{JobID: r.JobID, Reason: axtype.SkipReason(r.Reason), FirstTick: r.FirstTick.UTC(),
		LastTick: r.LastTick.UTC(), TickCount: int(deref(r.TickCount)), Detail: r.Detail, RecordedAt: r.RecordedAt.UTC()}, nil
}

// SkippedFireRecordPaused records s, ticks of a job paused since pausedAt:
// it extends the record of this pause's ticks made within the last hour
// when there is one (a paused every-second job adds to one row an hour,
// not a row a second), and inserts s otherwise.
func SkippedFireRecordPaused(ctx context.Context, e Executor, s *axtype.SkippedFire, pausedAt time.Time) error {
	if s.TickCount > 0 {
		_, err := queries.SkippedFireExtendPaused(ctx, e, dbsqlc.SkippedFireExtendPausedParams{JobID: s.JobID,
			PausedAt: pausedAt, FirstTick: s.FirstTick, LastTick: s.LastTick, TickCount: int32(s.TickCount)})
		if err == nil {
			return nil
		}
		if err = mapErr(err); !errors.Is(err, axtype.ErrNotFound) {
			return fmt.Errorf("error extending paused ticks: %w", err)
		}
	}
	return SkippedFireInsertMany(ctx, e, []*axtype.SkippedFire{s})
}
