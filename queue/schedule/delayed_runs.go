package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// FireDueRuns runs one batch of delayed runs: claims up to BatchSize
// pending runs due by now (plus FireAhead) and, in the same transaction,
// fires them as executions whose ids are the runs' ids, records the ones
// the job's policies skip, and holds those of paused jobs until resume.
// It returns how many runs it claimed.
//
// The job's policies apply as to a tick: a run later than the misfire
// threshold fires late (misfired) unless the misfire policy is skip or it
// is older than the catch-up window, and then it is recorded as skipped.
// Each delayed run is its own business event, so fire_once does not fold
// several late runs into one: each fires. forbid skips a run while the
// job has an unfinished execution; replace cancels that execution.
func (l *TriggerLoop) FireDueRuns(ctx context.Context) (int, error) {
	var b *batch
	err := db.WithTx(ctx, l.pool, func(tx pgx.Tx) error {
		due, err := db.DelayedRunClaimDue(ctx, tx, l.cfg.BatchSize, l.cfg.FireAhead, l.cfg.Clock.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		claimed := len(due)
		due = withinTasks(due, l.cfg.MaxTasks)
		fires, held := planDelayed(due, l.cfg.MisfireThreshold)
		if err := db.DelayedRunHold(ctx, tx, held); err != nil {
			return err
		}
		b = &batch{claimed: claimed, deferred: claimed - len(due), fires: fires, router: l.cfg.Router, outbox: l.cfg.Outbox}
		return b.write(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("error firing delayed runs: %w", err)
	}
	if b != nil && b.deferred > 0 {
		l.cfg.Logger.InfoContext(ctx, "due delayed runs left for the next pass: the batch has its most tasks", "runs", b.deferred)
	}
	return b.pass(ctx, l.cfg, "fired delayed runs"), nil
}

// withinTasks is the first of due (earliest first) whose runs' tasks fit
// in most (at least one run that makes tasks); the others stay pending,
// due, for the next pass. Held runs make no task.
func withinTasks(due []*axtype.DueDelayedRun, most int) []*axtype.DueDelayedRun {
	tasks := 0
	for i, r := range due {
		if r.Paused {
			continue
		}
		n := max(r.ShardCount, 1)
		if tasks > 0 && tasks+n > most {
			return due[:i]
		}
		tasks += n
	}
	return due
}

// planDelayed decides each claimed run (earliest first): fire, skip (with
// the record) or hold. It is pure: the database's clock comes with the
// runs.
func planDelayed(due []*axtype.DueDelayedRun, misfireThreshold time.Duration) (fires []*jobFire, held []uuid.UUID) {
	type fired struct {
		f *jobFire
		r *axtype.DueDelayedRun
	}
	lastFire := map[uuid.UUID]fired{} // a job's latest fire in this batch
	for _, r := range due {
		if r.Paused {
			held = append(held, r.ID)
			continue
		}
		f := &jobFire{jobID: r.JobID, delayedRun: r.ID}
		fires = append(fires, f)
		late := r.Now.Sub(r.RunAt)
		window := time.Duration(r.MisfireWindowSeconds) * time.Second
		missed := late > misfireThreshold
		switch {
		case missed && late > window:
			f.skips = delayedSkip(r, axtype.SkipMisfire, "missed by more than the catch-up window")
			continue
		case missed && r.MisfirePolicy == axtype.MisfireSkip:
			f.skips = delayedSkip(r, axtype.SkipMisfire, "missed; the misfire policy is skip")
			continue
		}
		earlier, firedBefore := lastFire[r.JobID]
		switch r.ConcurrencyPolicy {
		case axtype.ConcurrencyForbid:
			if r.HasUnfinished || firedBefore {
				f.skips = delayedSkip(r, axtype.SkipOverlap, "the previous execution was still unfinished")
				continue
			}
		case axtype.ConcurrencyReplace:
			if firedBefore { // it would be replaced at once: only the latest runs
				earlier.f.executions, earlier.f.replace = nil, false
				earlier.f.skips = delayedSkip(earlier.r, axtype.SkipOverlap, "replaced by a later delayed run fired in the same batch")
			}
			f.replace = r.HasUnfinished
		case axtype.ConcurrencyQueue:
			// It waits behind the unfinished run; when one waits already
			// the write cancels it (QueueFullReason).
			if r.HasUnfinished || firedBefore {
				f.waiting = []uuid.UUID{r.ID}
			}
		}
		f.executions = []*axtype.NewExecution{{ID: r.ID, JobID: r.JobID, Cause: axtype.CauseDelayed, ScheduledFor: r.RunAt,
			Misfired: missed, Params: r.Params, Priority: r.Priority, TraceParent: r.TraceParent}}
		lastFire[r.JobID] = fired{f, r}
	}
	return fires, held
}

// delayedSkip records a delayed run that did not fire; its detail names
// the run, so "why didn't it run?" finds it by id.
func delayedSkip(r *axtype.DueDelayedRun, reason axtype.SkipReason, detail string) []*axtype.SkippedFire {
	return []*axtype.SkippedFire{{JobID: r.JobID, Reason: reason, FirstTick: r.RunAt, LastTick: r.RunAt, TickCount: 1,
		Detail: "delayed run " + r.ID.String() + ": " + detail}}
}
