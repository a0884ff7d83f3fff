package queue

import (
	"cmp"
	"context"

	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
)

// TaskReadyChannel is NOTIFYed when new tasks are pending, so waiting
// lease requests wake at once.
const TaskReadyChannel = "ax_task_ready"

// TriggerLoopConfig tunes a TriggerLoop.
type TriggerLoopConfig struct {
	// BatchSize is how many due triggers one transaction claims. Defaults
	// to 500.
	BatchSize int
	// MisfireThreshold is how late a tick may fire and still be on time;
	// later ones follow the job's misfire policy. Defaults to 5 seconds.
	MisfireThreshold time.Duration
	// FireAhead is how early a tick may be fired: its execution commits
	// ahead and its tasks wait for the scheduled time, so a burst of
	// simultaneous ticks is runnable on time. Defaults to 250ms; negative
	// turns it off. A job paused within this window before a tick still
	// runs that tick.
	FireAhead time.Duration
	// MaxSleep caps how long the loop sleeps without checking the table,
	// as a fallback for a lost notification. Defaults to 5 seconds.
	MaxSleep time.Duration
	// Router places the new tasks on agents; nil leaves them unassigned.
	Router *TaskRouter
	// Outbox enqueues agentless HTTP tasks and callbacks in the fire's
	// transaction; nil: none.
	Outbox *Outbox
	// Logger defaults to discarding; Metrics defaults to unregistered.
	Logger  *slog.Logger
	Metrics *Metrics
}

func (c *TriggerLoopConfig) withDefaults() TriggerLoopConfig {
	out := *c
	out.BatchSize = cmp.Or(out.BatchSize, 500)
	out.MisfireThreshold = cmp.Or(out.MisfireThreshold, 5*time.Second)
	out.MaxSleep = cmp.Or(out.MaxSleep, 5*time.Second)
	out.FireAhead = max(cmp.Or(out.FireAhead, 250*time.Millisecond), 0)
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Metrics == nil {
		out.Metrics = NewMetrics(nil)
	}
	return out
}

// TriggerLoop fires due jobs. Every replica runs one: each sleeps until the
// earliest next_fire_at (or a job change), then claims due triggers with
// SKIP LOCKED, so replicas share the work and a tick fires once.
type TriggerLoop struct {
	pool     *pgxpool.Pool
	notifier *Notifier
	cfg      TriggerLoopConfig
	planner  *planner

	bg background
}

// NewTriggerLoop returns a loop over pool; notifier (may be nil) wakes it
// when jobs change.
func NewTriggerLoop(pool *pgxpool.Pool, notifier *Notifier, cfg TriggerLoopConfig) *TriggerLoop {
	cfg = cfg.withDefaults()
	return &TriggerLoop{
		pool: pool, notifier: notifier, cfg: cfg,
		planner: &planner{misfireThreshold: cfg.MisfireThreshold, fireAhead: cfg.FireAhead, ticks: triggerTicks{}},
	}
}

// Start runs the loop in the background until Stop.
func (l *TriggerLoop) Start(ctx context.Context) error {
	var wake <-chan struct{}
	unsubscribe := func() {}
	if l.notifier != nil {
		wake, unsubscribe = l.notifier.Subscribe(JobChangedChannel)
	}
	l.bg.start(ctx, func(ctx context.Context) {
		defer unsubscribe()
		l.run(ctx, wake)
	})
	return nil
}

// Stop ends the loop after its current batch. Safe to call twice or
// without Start.
func (l *TriggerLoop) Stop() { l.bg.stop() }

func (l *TriggerLoop) run(ctx context.Context, wake <-chan struct{}) {
	for ctx.Err() == nil {
		fired, err := l.FireDue(ctx)
		if err != nil && ctx.Err() == nil {
			l.cfg.Logger.ErrorContext(ctx, "error firing due jobs", "error", err)
			sleep(ctx, time.Second, wake)
			continue
		}
		if fired == l.cfg.BatchSize {
			continue // more may be due right now
		}
		sleep(ctx, l.untilNextDue(ctx), wake)
	}
}

// untilNextDue asks the database how long until the earliest fire.
func (l *TriggerLoop) untilNextDue(ctx context.Context) time.Duration {
	wait, ok, err := db.TriggerNextDue(ctx, l.pool)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.cfg.Logger.ErrorContext(ctx, "error finding next due job", "error", err)
		}
		return time.Second
	case !ok:
		return l.cfg.MaxSleep
	}
	return min(max(wait-l.cfg.FireAhead, 0), l.cfg.MaxSleep)
}

func sleep(ctx context.Context, d time.Duration, wake <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	}
}

// FireDue runs one batch: claims up to BatchSize due triggers and, in the
// same transaction, records their executions and tasks, skipped ticks and
// next fire times. It returns how many triggers it claimed.
func (l *TriggerLoop) FireDue(ctx context.Context) (int, error) {
	var b *batch
	err := db.WithTx(ctx, l.pool, func(tx pgx.Tx) error {
		due, err := db.TriggerClaimDue(ctx, tx, l.cfg.BatchSize, l.cfg.FireAhead, nil)
		if err != nil || len(due) == 0 {
			return err
		}
		if b, err = l.planBatch(due); err != nil {
			return err
		}
		return b.write(ctx, tx)
	})
	if err != nil {
		return 0, fmt.Errorf("error firing due jobs: %w", err)
	}
	if b == nil {
		return 0, nil
	}
	b.observe(l.cfg.Metrics)
	l.cfg.Logger.DebugContext(ctx, "fired due jobs", "claimed", b.claimed, "fired", len(b.inserted), "skipped", len(b.skips))
	return b.claimed, nil
}

// batch is the outcome of planning one claim.
type batch struct {
	claimed     int
	now         time.Time
	executions  []*db.NewExecution
	skips       []*db.SkippedFire
	advances    []*db.TriggerAdvance
	replaceJobs []uuid.UUID
	inserted    []db.InsertedExecution
	router      *TaskRouter
	outbox      *Outbox
}

func (l *TriggerLoop) planBatch(due []*db.DueTrigger) (*batch, error) {
	b := &batch{claimed: len(due), now: due[0].Now, router: l.cfg.Router, outbox: l.cfg.Outbox}
	for _, t := range due {
		plan, err := l.planner.plan(t, t.Now)
		if err != nil {
			return nil, fmt.Errorf("error planning fires of job %s: %w", t.JobID, err)
		}
		adv := &db.TriggerAdvance{JobID: t.JobID, NextFireAt: plan.next}
		for _, f := range plan.fires {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, fmt.Errorf("error generating execution id: %w", err)
			}
			cause := db.CauseSchedule
			if f.catchUp {
				cause = db.CauseCatchUp
			}
			b.executions = append(b.executions, &db.NewExecution{ID: id, JobID: t.JobID, Cause: cause,
				ScheduledFor: f.scheduledFor, Misfired: f.catchUp})
			adv.LastExecutionID, adv.LastScheduledFor = id, f.scheduledFor
		}
		if len(plan.fires) > 0 && t.ConcurrencyPolicy == "replace" && t.HasUnfinished {
			b.replaceJobs = append(b.replaceJobs, t.JobID)
		}
		b.skips = append(b.skips, plan.skips...)
		b.advances = append(b.advances, adv)
	}
	return b, nil
}

// write stores the batch in tx: cancellations for replace first, so they
// never touch the new executions.
func (b *batch) write(ctx context.Context, tx pgx.Tx) error {
	if len(b.replaceJobs) > 0 {
		if _, err := db.ExecutionCancel(ctx, tx, nil, b.replaceJobs, "replaced by a newer fire"); err != nil {
			return err
		}
	}
	var err error
	if b.inserted, err = insertExecutions(ctx, tx, b.router, b.outbox, b.executions); err != nil {
		return err
	}
	b.keepInsertedAsLast()
	if err := db.SkippedFireInsertMany(ctx, tx, b.skips); err != nil {
		return err
	}
	if err := db.TriggerAdvanceMany(ctx, tx, b.advances); err != nil {
		return err
	}
	if len(b.inserted) > 0 {
		return db.Notify(ctx, tx, TaskReadyChannel, "")
	}
	return nil
}

// keepInsertedAsLast points each trigger's last execution at one that was
// really inserted (a tick that had fired already was left out).
func (b *batch) keepInsertedAsLast() {
	if len(b.inserted) == len(b.executions) {
		return
	}
	ok := make(map[uuid.UUID]bool, len(b.inserted))
	for _, e := range b.inserted {
		ok[e.ID] = true
	}
	last := map[uuid.UUID]*db.NewExecution{}
	for _, e := range b.executions {
		if ok[e.ID] {
			last[e.JobID] = e
		}
	}
	for _, a := range b.advances {
		if e := last[a.JobID]; e != nil {
			a.LastExecutionID, a.LastScheduledFor = e.ID, e.ScheduledFor
		} else {
			a.LastExecutionID = uuid.Nil
		}
	}
}

func (b *batch) observe(m *Metrics) {
	for _, e := range b.executions {
		if e.Misfired {
			m.Misfire.Inc()
		}
	}
	misfired := map[uuid.UUID]bool{}
	for _, e := range b.executions {
		misfired[e.ID] = e.Misfired
	}
	for _, e := range b.inserted {
		if misfired[e.ID] {
			m.Fires.WithLabelValues(db.CauseCatchUp).Inc()
			continue
		}
		m.Fires.WithLabelValues(db.CauseSchedule).Inc()
		// A fire made ahead is runnable at its tick: no lag.
		m.FireLag.Observe(max(e.FiredAt.Sub(e.ScheduledFor), 0).Seconds())
	}
	for _, s := range b.skips {
		m.Skipped.WithLabelValues(s.Reason).Add(float64(max(s.TickCount, 1)))
		if s.Reason == db.SkipMisfire {
			m.Misfire.Add(float64(max(s.TickCount, 1)))
		}
	}
}
