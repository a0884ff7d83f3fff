package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
)

// MaxBackfillTicks bounds the ticks of one backfill.
const MaxBackfillTicks = 1_000_000

// ErrBackfillNotCron means a backfill was asked of a job without a cron
// trigger: only a cron trigger has past ticks to fill in.
var ErrBackfillNotCron = errors.New("a backfill fills in the ticks of a job's one cron trigger, and this job has none (or several triggers)")

// ErrBackfillTooManyTicks means a backfill's range holds more than
// MaxBackfillTicks ticks.
var ErrBackfillTooManyTicks = fmt.Errorf("the range holds more than %d ticks of the job: split it", MaxBackfillTicks)

// BackfillTicks counts the ticks of a cron expression in timezone tz in
// [from, to) and returns the first (to when there is none). It stops with
// ErrBackfillTooManyTicks past MaxBackfillTicks.
func BackfillTicks(expr, tz string, from, to time.Time) (first time.Time, count int, err error) {
	sched, err := schedules.get(expr, tz)
	if err != nil {
		return time.Time{}, 0, err
	}
	first = to
	for tick := sched.Next(from.Add(-time.Nanosecond)); !tick.IsZero() && tick.Before(to); tick = sched.Next(tick) {
		if count == 0 {
			first = tick
		}
		if count++; count > MaxBackfillTicks {
			return time.Time{}, 0, ErrBackfillTooManyTicks
		}
	}
	return first, count, nil
}

// BackfillReleaserConfig tunes a BackfillReleaser.
type BackfillReleaserConfig struct {
	// BatchSize is how many running backfills one pass holds. Defaults to 50.
	BatchSize int
	// MaxTasks bounds the tasks one pass writes, all backfills together
	// (see axtype.MaxTasksPerBatch, the default; the first backfill served
	// makes at least one run). The backfills past it are served first in
	// the next pass.
	MaxTasks int
	// TicksPerPass bounds the runs one pass makes for one backfill, so a
	// backfill with a large max_concurrent is written in short
	// transactions. Defaults to 1000.
	TicksPerPass int
	// MaxSleep is how long the releaser sleeps when no notification
	// wakes it: the fallback for a lost one. Defaults to 2 seconds.
	MaxSleep time.Duration
	// MinSleep is the least it sleeps between passes, so a stream of
	// ending runs (each NOTIFYs) wakes it in batches. Defaults to 20ms.
	MinSleep time.Duration
	// Router places the new tasks on agents; nil leaves them unassigned.
	Router *dispatch.TaskRouter
	// Outbox enqueues agentless HTTP tasks in the release's transaction.
	Outbox *delivery.Outbox
	// Logger defaults to discarding; Metrics defaults to unregistered.
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

func (c *BackfillReleaserConfig) withDefaults() BackfillReleaserConfig {
	out := *c
	out.BatchSize = cmp.Or(out.BatchSize, 50)
	out.TicksPerPass = cmp.Or(out.TicksPerPass, 1000)
	out.MaxTasks = cmp.Or(out.MaxTasks, axtype.MaxTasksPerBatch)
	out.MaxSleep = cmp.Or(out.MaxSleep, 2*time.Second)
	out.MinSleep = cmp.Or(out.MinSleep, 20*time.Millisecond)
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Metrics == nil {
		out.Metrics = metrics.New(nil)
	}
	return out
}

// BackfillReleaser releases the ticks of running backfills as runs, in
// tick order, at most each backfill's max_concurrent unfinished at a time.
// Every replica runs one; a backfill is held (SKIP LOCKED) by one pass at
// a time, and each release holds the job's trigger row as the trigger
// loop does, so a tick gets one run whoever makes it.
type BackfillReleaser struct {
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	cfg      BackfillReleaserConfig
	bg       startstop.Runner
}

// NewBackfillReleaser returns a releaser over pool; notifier (may be nil)
// wakes it when runs end and backfills are created.
func NewBackfillReleaser(pool *pgxpool.Pool, notifier *notify.Notifier, cfg BackfillReleaserConfig) *BackfillReleaser {
	return &BackfillReleaser{pool: pool, notifier: notifier, cfg: cfg.withDefaults()}
}

// Start runs the releaser in the background until Stop.
func (r *BackfillReleaser) Start(ctx context.Context) error {
	passLoop{notifier: r.notifier, channels: []string{notify.ExecutionEndedChannel, notify.BackfillChannel},
		minSleep: r.cfg.MinSleep, maxSleep: r.cfg.MaxSleep, logger: r.cfg.Logger, msg: "error releasing backfills",
		pass: r.releaseDue}.start(ctx, &r.bg)
	return nil
}

// Stop ends the releaser after its current pass. Safe to call twice or
// without Start.
func (r *BackfillReleaser) Stop() { r.bg.Stop() }

// ReleaseDue runs one pass: it holds up to BatchSize running backfills
// that have room (those served longest ago first) and releases what each
// may run now. It returns how many runs it made. A
// backfill whose release fails is logged and left for the next pass; the
// others go on.
func (r *BackfillReleaser) ReleaseDue(ctx context.Context) (int, error) {
	made, _, err := r.releaseDue(ctx)
	return made, err
}

// releaseDue is ReleaseDue; more says it stopped at MaxTasks with claimed
// backfills left, so the next pass comes at once.
func (r *BackfillReleaser) releaseDue(ctx context.Context) (made int, more bool, err error) {
	err = db.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		claimed, err := db.BackfillClaim(ctx, tx, r.cfg.BatchSize)
		if err != nil {
			return err
		}
		tasks := 0
		for _, b := range claimed {
			shards := max(b.ShardCount, 1)
			if tasks > 0 && tasks+shards > r.cfg.MaxTasks {
				more = true
				break // the rest are left as they are, for the next pass
			}
			var n int
			err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
				var err error
				n, err = r.release(ctx, sp, b, max((r.cfg.MaxTasks-tasks)/shards, 1))
				return err
			})
			switch {
			case err == nil:
				made += n
				tasks += n * shards
				// At the bound, this backfill may have had more to release.
				more = more || tasks+shards > r.cfg.MaxTasks
			case ctx.Err() != nil || db.Transient(err):
				return err
			default:
				r.cfg.Logger.ErrorContext(ctx, "error releasing a backfill", "backfill_id", b.ID, "job_id", b.JobID, "error", err)
			}
		}
		if made > 0 {
			return db.Notify(ctx, tx, notify.TaskReadyChannel, "")
		}
		return nil
	})
	if err != nil {
		return 0, false, fmt.Errorf("error releasing backfills: %w", err)
	}
	if made > 0 {
		r.notifier.AfterCommit(notify.TaskReadyChannel) // as FireDue
	}
	return made, more, nil
}

// release makes the runs one backfill may start now, at most most of
// them, and moves it on.
func (r *BackfillReleaser) release(ctx context.Context, tx pgx.Tx, b *db.ClaimedBackfill, most int) (int, error) {
	slots := min(b.MaxConcurrent-b.InFlight, r.cfg.TicksPerPass, most)
	if b.Overlap == axtype.BackfillOverlapForbid {
		slots = 1
		if b.JobBusy {
			slots = 0
		}
	}
	trig, err := db.BackfillLockTrigger(ctx, tx, b.JobID)
	if err != nil {
		return 0, err
	}
	if trig.Kind != axtype.TriggerCron {
		// The job lost its cron trigger: it has no ticks left to fill in.
		return 0, db.BackfillAdvance(ctx, tx, &db.BackfillAdvanceParams{ID: b.ID, NextTick: b.To, Done: b.InFlight == 0})
	}
	// Ticks from the trigger's next one on are its own to fire (or to
	// skip under its misfire policy, after which they are backfilled).
	limit := b.To
	if trig.NextFireAt != nil && trig.NextFireAt.Before(limit) {
		limit = *trig.NextFireAt
	}
	step, err := r.pick(ctx, tx, b, trig, limit, slots)
	if err != nil {
		return 0, err
	}
	inserted, err := dispatch.InsertExecutions(ctx, tx, r.cfg.Router, r.cfg.Outbox, step.fires, nil)
	if err != nil {
		return 0, err
	}
	if err := db.BackfillRunInsertMany(ctx, tx, b.ID, inserted); err != nil {
		return 0, err
	}
	done := !step.cursor.Before(b.To) && b.InFlight == 0 && len(inserted) == 0
	err = db.BackfillAdvance(ctx, tx, &db.BackfillAdvanceParams{ID: b.ID, NextTick: step.cursor,
		Created: len(inserted), Existing: step.existing + len(step.fires) - len(inserted), Done: done})
	if err != nil {
		return 0, err
	}
	r.cfg.Metrics.Fires.WithLabelValues(string(axtype.CauseBackfill)).Add(float64(len(inserted)))
	for _, e := range inserted {
		r.cfg.Logger.DebugContext(ctx, "backfilled tick released", "backfill_id", b.ID, "job_id", b.JobID,
			"execution_id", e.ID, "tick", e.ScheduledFor)
	}
	if done {
		r.cfg.Logger.InfoContext(ctx, "backfill finished", "backfill_id", b.ID, "job_id", b.JobID)
	}
	return len(inserted), nil
}

// releaseStep is what one release of a backfill does.
type releaseStep struct {
	fires    []*axtype.NewExecution
	existing int       // ticks passed over: they have a run already
	cursor   time.Time // the first tick not yet looked at (b.To when none is left)
}

// pick walks the backfill's ticks from its cursor, before limit, passing
// over those that have a run, until it has slots ticks to run.
func (r *BackfillReleaser) pick(ctx context.Context, tx pgx.Tx, b *db.ClaimedBackfill, trig *db.BackfillTrigger, limit time.Time, slots int) (*releaseStep, error) {
	sched, err := schedules.get(trig.CronExpr, trig.Timezone)
	if err != nil {
		return nil, err
	}
	// The cursor is a tick of the schedule the job had then: one changed
	// since goes on from the cursor with its own ticks.
	step := &releaseStep{cursor: b.NextTick}
	const window = 500 // ticks looked up at once
	for slots > 0 && step.cursor.Before(limit) {
		var ticks []time.Time
		for tick := sched.Next(step.cursor.Add(-time.Nanosecond)); !tick.IsZero() && tick.Before(limit) && len(ticks) < window; tick = sched.Next(tick) {
			ticks = append(ticks, tick)
		}
		run, err := db.BackfillTicksRun(ctx, tx, b.JobID, ticks)
		if err != nil {
			return nil, err
		}
		for _, tick := range ticks {
			if slots == 0 {
				break
			}
			step.cursor = sched.Next(tick)
			if step.cursor.IsZero() || step.cursor.After(b.To) {
				step.cursor = b.To
			}
			if run[tick] {
				step.existing++
				continue
			}
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("error generating execution id: %w", err)
			}
			step.fires = append(step.fires, &axtype.NewExecution{ID: id, JobID: b.JobID, Cause: axtype.CauseBackfill, ScheduledFor: tick})
			slots--
		}
	}
	return step, nil
}
