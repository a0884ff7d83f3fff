package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// TriggerSetNextFire sets when a job fires next (nil: never).
func TriggerSetNextFire(ctx context.Context, e Executor, jobID uuid.UUID, next *time.Time) (*dbsqlc.AxTrigger, error) {
	t, err := queries.TriggerSetNextFire(ctx, e, dbsqlc.TriggerSetNextFireParams{JobID: jobID, NextFireAt: next})
	if err != nil {
		return nil, fmt.Errorf("error setting next fire of job %s: %w", jobID, mapErr(err))
	}
	return &t, nil
}

// TriggerPause stops a job from firing; its next_fire_at stays so that the
// fires missed while paused can be accounted for on resume.
func TriggerPause(ctx context.Context, e Executor, jobID uuid.UUID) error {
	if _, err := queries.TriggerPause(ctx, e, jobID); err != nil {
		return fmt.Errorf("error pausing job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// TriggerResume lets a paused job fire again.
func TriggerResume(ctx context.Context, e Executor, jobID uuid.UUID) error {
	if _, err := queries.TriggerResume(ctx, e, jobID); err != nil {
		return fmt.Errorf("error resuming job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// TriggerSetAsideParams names jobs the trigger loop stops firing, each
// with why.
type TriggerSetAsideParams struct {
	JobIDs  []uuid.UUID
	Reasons []string
}

// TriggerSetAside stops the trigger loop from firing jobs whose fire
// failed until they are updated; their next_fire_at stays.
func TriggerSetAside(ctx context.Context, e Executor, p *TriggerSetAsideParams) error {
	if len(p.JobIDs) == 0 {
		return nil
	}
	err := queries.TriggerSetAside(ctx, e, dbsqlc.TriggerSetAsideParams{JobIds: p.JobIDs, Reasons: p.Reasons})
	if err != nil {
		return fmt.Errorf("error setting jobs aside: %w", mapErr(err))
	}
	return nil
}

// TriggerClaimDue locks up to max triggers due within `ahead` from now
// until the transaction ends; rows locked by other replicas are skipped.
// now, when set, replaces the database clock (tests and benchmarks).
func TriggerClaimDue(ctx context.Context, e Executor, max int, ahead time.Duration, now *time.Time) ([]*axtype.DueTrigger, error) {
	rows, err := queries.TriggerClaimDue(ctx, e, dbsqlc.TriggerClaimDueParams{
		Now: now, Max: int32(max), AheadMs: ahead.Milliseconds(),
	})
	if err != nil {
		return nil, fmt.Errorf("error claiming due triggers: %w", mapErr(err))
	}
	out := make([]*axtype.DueTrigger, len(rows))
	for i, r := range rows {
		out[i] = &axtype.DueTrigger{
			JobID: r.ID, TriggerKind: axtype.TriggerKind(r.TriggerKind), CronExpr: deref(r.CronExpr), Timezone: r.Timezone,
			IntervalSeconds: deref(r.IntervalSeconds), ConcurrencyPolicy: axtype.ConcurrencyPolicy(r.ConcurrencyPolicy),
			MisfirePolicy: axtype.MisfirePolicy(r.MisfirePolicy), MisfireWindowSeconds: int(r.MisfireWindowSeconds),
			MisfireMaxFires: int(r.MisfireMaxFires), NextFireAt: r.NextFireAt.UTC(), Now: r.DbNow.UTC(), HasUnfinished: r.HasUnfinished,
			HasWaiting: r.HasWaiting,
			Paused:     r.Paused, PausedAt: utcPtr(r.PausedAt),
			ActiveFrom: utcPtr(r.ActiveFrom), ActiveUntil: utcPtr(r.ActiveUntil), Exclude: r.Exclude,
			ShardCount: int(r.ShardCount),
		}
		if out[i].Triggers, err = triggersFromJSON(r.ID, r.Triggers); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// TriggerAdvanceMany moves claimed triggers to their next ticks.
func TriggerAdvanceMany(ctx context.Context, e Executor, advances []*axtype.TriggerAdvance) error {
	if len(advances) == 0 {
		return nil
	}
	p := dbsqlc.TriggerAdvanceManyParams{}
	for _, a := range advances {
		fired := a.LastExecutionID != uuid.Nil
		p.JobIds = append(p.JobIds, a.JobID)
		p.HasNext = append(p.HasNext, a.NextFireAt != nil)
		p.NextFireAts = append(p.NextFireAts, deref(a.NextFireAt))
		p.Fired = append(p.Fired, fired)
		p.LastScheduledFors = append(p.LastScheduledFors, a.LastScheduledFor)
		p.LastExecutionIds = append(p.LastExecutionIds, a.LastExecutionID)
	}
	if err := queries.TriggerAdvanceMany(ctx, e, p); err != nil {
		return fmt.Errorf("error advancing triggers: %w", mapErr(err))
	}
	return nil
}

// TriggerNextDue returns how long until the earliest unpaused fire by the
// database clock (negative when one is due); ok is false when nothing is
// scheduled at all. now, when set, replaces the database clock (tests).
func TriggerNextDue(ctx context.Context, e Executor, now *time.Time) (wait time.Duration, ok bool, err error) {
	r, err := queries.TriggerNextDue(ctx, e, now)
	if err != nil {
		return 0, false, fmt.Errorf("error finding next due trigger: %w", mapErr(err))
	}
	return time.Duration(r.Micros) * time.Microsecond, r.Scheduled, nil
}

// TriggerRecordFire records a fire made through the API as the job's last.
func TriggerRecordFire(ctx context.Context, e Executor, jobID, executionID uuid.UUID, scheduledFor time.Time) error {
	err := queries.TriggerRecordFire(ctx, e, dbsqlc.TriggerRecordFireParams{
		JobID: jobID, ExecutionID: &executionID, ScheduledFor: &scheduledFor,
	})
	if err != nil {
		return fmt.Errorf("error recording fire of job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// TriggerCountOverdue reads overdue triggers; late is the threshold.
func TriggerCountOverdue(ctx context.Context, e Executor, late time.Duration) (axtype.Overdue, error) {
	r, err := queries.TriggerCountOverdue(ctx, e, late.Seconds())
	if err != nil {
		return axtype.Overdue{}, fmt.Errorf("error reading overdue triggers: %w", mapErr(err))
	}
	return axtype.Overdue{Late: r.Overdue, Longest: time.Duration(r.MaxOverdueSeconds * float64(time.Second)),
		SetAside: r.SetAside}, nil
}

// triggersFromJSON decodes a job's trigger list (NULL: nil, one trigger).
func triggersFromJSON(jobID uuid.UUID, raw []byte) ([]axtype.TriggerSpec, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var out []axtype.TriggerSpec
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, fmt.Errorf("error decoding the triggers of job %s: %w", jobID, err)
	}
	return out, nil
}

// triggersJSON encodes a job's trigger list: nil (NULL) for one trigger.
func triggersJSON(specs []axtype.TriggerSpec) ([]byte, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	raw, err := json.Marshal(specs)
	if err != nil {
		return nil, fmt.Errorf("error encoding triggers: %w", err)
	}
	return raw, nil
}
