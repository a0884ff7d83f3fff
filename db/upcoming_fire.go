package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// UpcomingFireLock takes, for the transaction, the lock of the replica
// that replaces the upcoming fires; false when another holds it.
func UpcomingFireLock(ctx context.Context, e Executor) (bool, error) {
	locked, err := queries.UpcomingFireLock(ctx, e)
	if err != nil {
		return false, fmt.Errorf("error locking upcoming fires: %w", mapErr(err))
	}
	return locked, nil
}

// UpcomingFireFresh says whether the upcoming fires were listed less than
// within ago (an empty list is never fresh).
func UpcomingFireFresh(ctx context.Context, e Executor, within time.Duration) (bool, error) {
	fresh, err := queries.UpcomingFireFresh(ctx, e, within.Milliseconds())
	if err != nil {
		return false, fmt.Errorf("error reading upcoming fires: %w", mapErr(err))
	}
	return fresh, nil
}

// UpcomingFireSources returns the unpaused cron and interval triggers due
// before until, as DueTriggers (kind, expression, zone, interval, next).
func UpcomingFireSources(ctx context.Context, e Executor, until time.Time) ([]*axtype.DueTrigger, error) {
	rows, err := queries.UpcomingFireSources(ctx, e, until)
	if err != nil {
		return nil, fmt.Errorf("error reading upcoming triggers: %w", mapErr(err))
	}
	out := make([]*axtype.DueTrigger, len(rows))
	for i, r := range rows {
		out[i] = &axtype.DueTrigger{JobID: r.ID, TriggerKind: axtype.TriggerKind(r.TriggerKind), CronExpr: deref(r.CronExpr),
			Timezone: r.Timezone, IntervalSeconds: deref(r.IntervalSeconds), NextFireAt: r.NextFireAt.UTC(),
			ActiveFrom: utcPtr(r.ActiveFrom), ActiveUntil: utcPtr(r.ActiveUntil), Exclude: r.Exclude}
		if out[i].Triggers, err = triggersFromJSON(r.ID, r.Triggers); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// UpcomingFireReplace makes the upcoming fires exactly the given ones
// (jobIDs[i] fires at fireAts[i]), writing only the ticks that changed,
// and notes the time of the pass for UpcomingFireFresh.
func UpcomingFireReplace(ctx context.Context, e Executor, jobIDs []uuid.UUID, fireAts []time.Time) error {
	if jobIDs == nil {
		jobIDs, fireAts = []uuid.UUID{}, []time.Time{} // none wanted: an empty array, not NULL
	}
	if _, err := queries.UpcomingFireSync(ctx, e, dbsqlc.UpcomingFireSyncParams{JobIds: jobIDs, FireAts: fireAts}); err != nil {
		return fmt.Errorf("error storing upcoming fires: %w", mapErr(err))
	}
	return nil
}
