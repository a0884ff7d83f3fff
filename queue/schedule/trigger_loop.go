package schedule

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/runlog"
)

// TriggerLoopConfig tunes a TriggerLoop.
type TriggerLoopConfig struct {
	// BatchSize is how many due triggers one transaction claims. Defaults
	// to 500.
	BatchSize int
	// Claimers is how many batches a pass may write at once: a claim that
	// comes back full (a burst of ticks due together) starts the next
	// batch's claim beside it, as another replica's loop would (SKIP
	// LOCKED splits the work), up to Claimers. Defaults to 2.
	Claimers int
	// MisfireThreshold is how late a tick may fire and still be on time;
	// later ones follow the job's misfire policy. Defaults to 5 seconds.
	MisfireThreshold time.Duration
	// FireAhead is how early a tick may be fired: its execution commits
	// ahead and its tasks wait for the scheduled time, so a burst of
	// simultaneous ticks is runnable on time. Defaults to 250ms; negative
	// turns it off. A job paused within this window before a tick still
	// runs that tick.
	FireAhead time.Duration
	// MaxTasks bounds the tasks one batch writes (see
	// axtype.MaxTasksPerBatch, the default): the jobs and delayed runs
	// past it wait for the next pass.
	MaxTasks int
	// MaxSleep caps how long the loop sleeps without checking the table,
	// as a fallback for a lost notification. Defaults to 5 seconds.
	MaxSleep time.Duration
	// Router places the new tasks on agents; nil leaves them unassigned.
	Router *dispatch.TaskRouter
	// Outbox enqueues agentless HTTP tasks and callbacks in the fire's
	// transaction; nil: none.
	Outbox *delivery.Outbox
	// Clock, when set, is the time the loop claims due triggers and
	// computes its sleep by (tests that move time forward); nil: the
	// database's now().
	Clock *clock.Clock
	// Logger defaults to discarding; Metrics defaults to unregistered.
	Logger  *slog.Logger
	Metrics *metrics.Metrics
	// FireLines bounds the info lines of fires (one per run fired); past
	// it a summary line a second. Defaults to runlog.DefaultLinesPerSecond
	// a second.
	FireLines *runlog.LineBudget
}

func (c *TriggerLoopConfig) withDefaults() TriggerLoopConfig {
	out := *c
	out.BatchSize = cmp.Or(out.BatchSize, 500)
	out.Claimers = max(cmp.Or(out.Claimers, 2), 1)
	out.MisfireThreshold = cmp.Or(out.MisfireThreshold, 5*time.Second)
	out.MaxSleep = cmp.Or(out.MaxSleep, 5*time.Second)
	out.MaxTasks = cmp.Or(out.MaxTasks, axtype.MaxTasksPerBatch)
	out.FireAhead = max(cmp.Or(out.FireAhead, 250*time.Millisecond), 0)
	if out.Logger == nil {
		out.Logger = slog.New(slog.DiscardHandler)
	}
	if out.Metrics == nil {
		out.Metrics = metrics.New(nil)
	}
	if out.FireLines == nil {
		out.FireLines = runlog.NewLineBudget(out.Logger, 0, "more runs fired than are logged one by one")
	}
	return out
}

// TriggerLoop fires due jobs. Every replica runs one: each sleeps until the
// earliest next_fire_at (or a job change), then claims due triggers with
// SKIP LOCKED, so replicas share the work and a tick fires once.
type TriggerLoop struct {
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	cfg      TriggerLoopConfig
	planner  *planner
	// calendars caches the exclusion calendars of the jobs it fires.
	calendars calendarCache
	forgotAt  time.Time // the last delete of old waits (ReleaseWaiting)

	bg startstop.Runner
}

// NewTriggerLoop returns a loop over pool; notifier (may be nil) wakes it
// when jobs change.
func NewTriggerLoop(pool *pgxpool.Pool, notifier *notify.Notifier, cfg TriggerLoopConfig) *TriggerLoop {
	cfg = cfg.withDefaults()
	return &TriggerLoop{
		pool: pool, notifier: notifier, cfg: cfg,
		planner: &planner{misfireThreshold: cfg.MisfireThreshold, fireAhead: cfg.FireAhead, ticks: triggerTicks{}},
	}
}

// Start runs the loop in the background until Stop.
func (l *TriggerLoop) Start(ctx context.Context) error {
	var jobs, runs <-chan struct{}
	unsubscribe := func() {}
	if l.notifier != nil {
		var stopJobs, stopRuns func()
		jobs, stopJobs = l.notifier.Subscribe(notify.JobChangedChannel)
		runs, stopRuns = l.notifier.Subscribe(notify.RunScheduledChannel)
		unsubscribe = func() { stopJobs(); stopRuns() }
	}
	l.bg.Start(ctx, func(ctx context.Context) {
		defer unsubscribe()
		l.run(ctx, jobs, runs)
	})
	return nil
}

// Stop ends the loop after its current batch. Safe to call twice or
// without Start.
func (l *TriggerLoop) Stop() { l.bg.Stop() }

func (l *TriggerLoop) run(ctx context.Context, jobsChanged, runsScheduled <-chan struct{}) {
	for ctx.Err() == nil {
		fired, full, err := l.fireDueTogether(ctx)
		runs, runsErr := l.FireDueRuns(ctx)
		_, releaseErr := l.ReleaseWaiting(ctx)
		if err = errors.Join(err, runsErr, releaseErr); err != nil && ctx.Err() == nil {
			l.cfg.Logger.ErrorContext(ctx, "error firing due jobs", "error", err)
			notify.Sleep(ctx, time.Second, jobsChanged, runsScheduled)
			continue
		}
		if full || runs == l.cfg.BatchSize {
			continue // more may be due right now
		}
		if (fired > 0 || runs > 0) && l.cfg.FireAhead > 0 {
			// A pass that fired something looks again after the shortest
			// pause (fireAheadSlices) without asking the database when
			// the next fire is: in a stream that is the answer anyway, and
			// asking costs most then. The earliest pending run is the
			// first live entry of delayed_run_due_idx, whose head the runs
			// just fired fill with dead entries until a vacuum: 12 ms a
			// question, 195 of them in one BenchmarkDelayedRuns run
			// (pg_stat_statements). A stream's end costs one empty pass.
			notify.Sleep(ctx, l.cfg.FireAhead/fireAheadSlices, jobsChanged, runsScheduled)
			continue
		}
		notify.Sleep(ctx, l.untilNextDue(ctx), jobsChanged, runsScheduled)
	}
}

// untilNextDue asks the database how long until the earliest fire.
func (l *TriggerLoop) untilNextDue(ctx context.Context) time.Duration {
	wait, ok, err := db.TriggerNextDue(ctx, l.pool, l.cfg.Clock.Now())
	switch {
	case err != nil:
		if ctx.Err() == nil {
			l.cfg.Logger.ErrorContext(ctx, "error finding next due job", "error", err)
		}
		return time.Second
	case !ok:
		return l.cfg.MaxSleep
	}
	return min(max(wait-l.cfg.FireAhead, l.cfg.FireAhead/fireAheadSlices), l.cfg.MaxSleep)
}

// fireAheadSlices: a loop that has fired what was due sleeps at least a
// fifth of FireAhead before it looks again, so a steady stream of fires
// (delayed runs due every 0.2 ms, ticks of many jobs) is written in
// batches of what enters the window meanwhile, each still committed at
// least four fifths of FireAhead before its time, instead of one
// transaction per fire. A notification (a job changed, a run stored due
// soon) still wakes it at once.
const fireAheadSlices = 5

// FireDue runs one batch: claims up to BatchSize due triggers and, in the
// same transaction, records their executions and tasks, skipped ticks and
// next fire times. It returns how many triggers it claimed.
//
// A job whose fire fails does not stop the others: its planning error, or
// an error of the statements that write its fire, sets it aside (recorded
// on its trigger row, counted and logged) and the rest of the batch fires.
// The batch is written in one set-based pass; only when that fails is it
// split in halves under savepoints until the failing jobs are found.
func (l *TriggerLoop) FireDue(ctx context.Context) (int, error) {
	return l.fireDue(ctx, nil)
}

// fireDueTogether is a pass's FireDue: a claim that comes back full
// starts another batch beside it (up to Claimers), so that a burst of
// ticks due at one instant is written on as many connections, not one
// batch after another: with 1,000 every-second jobs, one loop took 77 ms
// to the last fire of each second (p99 of BenchmarkFireLag without
// fire-ahead). It returns how many triggers the batches claimed and
// whether any was full (more may be due).
func (l *TriggerLoop) fireDueTogether(ctx context.Context) (fired int, full bool, err error) {
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		errs    []error
		started = 1
		claim   func()
	)
	beside := func() { // called by a claim that came back full
		mu.Lock()
		defer mu.Unlock()
		if started < l.cfg.Claimers {
			started++
			wg.Go(claim)
		}
	}
	claim = func() {
		n, err := l.fireDue(ctx, beside)
		mu.Lock()
		defer mu.Unlock()
		fired += n
		full = full || n == l.cfg.BatchSize
		errs = append(errs, err)
	}
	wg.Go(claim)
	wg.Wait()
	return fired, full, errors.Join(errs...)
}

// fireDue is FireDue; full, when not nil, is called as soon as the claim
// comes back full, before the batch is written.
func (l *TriggerLoop) fireDue(ctx context.Context, full func()) (int, error) {
	var b *batch
	err := db.WithTx(ctx, l.pool, func(tx pgx.Tx) error {
		due, err := db.TriggerClaimDue(ctx, tx, l.cfg.BatchSize, l.cfg.FireAhead, l.cfg.Clock.Now())
		if err != nil || len(due) == 0 {
			return err
		}
		if full != nil && len(due) == l.cfg.BatchSize {
			full()
		}
		if err := l.calendars.resolve(ctx, tx, due); err != nil {
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
	if b != nil && b.deferred > 0 {
		l.cfg.Logger.InfoContext(ctx, "due jobs left for the next pass: the batch has its most tasks", "jobs", b.deferred)
	}
	if b != nil && len(b.inserted) > 0 {
		// While notifications are lost, this replica's lease polls need
		// not wait for the next poll to see the new tasks.
		l.notifier.AfterCommit(notify.TaskReadyChannel)
	}
	return b.pass(ctx, l.cfg, "fired due jobs"), nil
}

// releaseBatch bounds the jobs one ReleaseWaiting pass looks at and the
// old waits it forgets.
const releaseBatch = 500

// forgetEvery spaces the passes that delete old waits: a loop passes
// many times a second in a stream of fires, and the rows are few.
const forgetEvery = time.Minute

// ReleaseWaiting is the sweep behind the release in the ending
// transaction (ax.queued_run_release, run by a trigger on ax.execution):
// it starts the waiting runs of queue jobs whose run waited behind has
// ended, which that release misses only when the end and the fire that
// made the run wait committed at the same time, each not seeing the
// other. It also forgets waits released more than
// axtype.QueuedRunForget ago. It returns how many tasks it released.
func (l *TriggerLoop) ReleaseWaiting(ctx context.Context) (int, error) {
	jobs, err := db.QueuedRunWaitingJobs(ctx, l.pool, releaseBatch)
	if err != nil {
		return 0, err
	}
	n, err := db.QueuedRunRelease(ctx, l.pool, jobs)
	if err != nil {
		return 0, err
	}
	if n > 0 {
		l.cfg.Logger.InfoContext(ctx, "waiting runs released by the sweep", "tasks", n)
	}
	now := time.Now() // a month's cutoff: the skew of this clock does not matter
	if c := l.cfg.Clock.Now(); c != nil {
		now = *c
	}
	if now.Sub(l.forgotAt) < forgetEvery {
		return n, nil
	}
	if _, err := db.QueuedRunForget(ctx, l.pool, now.Add(-axtype.QueuedRunForget), releaseBatch); err != nil {
		return n, err
	}
	l.forgotAt = now
	return n, nil
}

// pass is report for the loop: the claimed count, or BatchSize when the
// batch left some of its claims for the next pass (they are due now: the
// loop looks again at once, as after a full claim).
func (b *batch) pass(ctx context.Context, cfg TriggerLoopConfig, msg string) int {
	n := b.report(ctx, cfg, msg)
	if b != nil && b.deferred > 0 {
		n = max(n, cfg.BatchSize)
	}
	return n
}

// report counts and logs a committed batch (nil: nothing was due) and
// returns how many rows it claimed.
func (b *batch) report(ctx context.Context, cfg TriggerLoopConfig, msg string) int {
	if b == nil {
		return 0
	}
	b.observe(cfg.Metrics)
	b.logSetAside(ctx, cfg.Logger)
	for _, e := range b.inserted {
		if cfg.FireLines.Allow("fired") {
			cfg.Logger.InfoContext(ctx, "run fired", "execution_id", e.ID, "job_id", e.JobID,
				"scheduled_for", e.ScheduledFor, "lag_ms", e.FiredAt.Sub(e.ScheduledFor).Milliseconds())
		}
	}
	cfg.Logger.DebugContext(ctx, msg, "claimed", b.claimed, "fired", len(b.inserted),
		"set_aside", len(b.setAside), "failed", len(b.failed))
	return b.claimed
}

// maxSetAsideReason bounds the reason recorded on a set-aside trigger.
const maxSetAsideReason = 2000

// batch is the outcome of planning one claim.
type batch struct {
	claimed  int
	deferred int // claimed jobs or runs left for the next pass (MaxTasks)
	fires    []*jobFire
	written  []*jobFire
	setAside []setAside
	failed   []failedRun
	inserted []axtype.InsertedExecution
	ready    notify.Targets // whom the fires' task-ready notification is for
	router   *dispatch.TaskRouter
	outbox   *delivery.Outbox
}

// jobFire is what one claimed trigger, or one delayed run, writes.
type jobFire struct {
	jobID      uuid.UUID
	executions []*axtype.NewExecution
	skips      []*axtype.SkippedFire
	pausedAt   *time.Time             // skips are ticks passed while paused since then
	advance    *axtype.TriggerAdvance // nil for a delayed run
	replace    bool                   // cancel the job's unfinished executions first
	waiting    []uuid.UUID            // executions that wait behind an unfinished one (policy queue)
	delayedRun uuid.UUID              // the delayed run this fire consumes (uuid.Nil: a trigger's)
}

// failedRun is a delayed run whose fire could not be written: it is
// cancelled with why, so it neither blocks the others nor vanishes.
type failedRun struct {
	id     uuid.UUID
	reason string
}

// setAside is a job the batch stops firing, and why.
type setAside struct {
	jobID  uuid.UUID
	step   string
	reason string
}

func newSetAside(jobID uuid.UUID, step, reason string) setAside {
	if len(reason) > maxSetAsideReason {
		reason = strings.ToValidUTF8(reason[:maxSetAsideReason], "") + "…"
	}
	return setAside{jobID: jobID, step: step, reason: reason}
}

func (l *TriggerLoop) planBatch(due []*axtype.DueTrigger) (*batch, error) {
	b := &batch{claimed: len(due), router: l.cfg.Router, outbox: l.cfg.Outbox}
	tasks := 0
	for i, t := range due {
		f, err := l.planOne(t)
		if err != nil {
			b.setAside = append(b.setAside, newSetAside(t.JobID, metrics.SetAsidePlan, "planning its fires failed: "+err.Error()))
			continue
		}
		n := len(f.executions) * max(t.ShardCount, 1)
		if tasks > 0 && tasks+n > l.cfg.MaxTasks {
			// This job and the rest stay as they are, due: the next pass
			// takes them, in their order.
			b.deferred = len(due) - i
			break
		}
		tasks += n
		b.fires = append(b.fires, f)
	}
	return b, nil
}

// planOne plans the fires of one trigger; a panic in planning is the
// job's error, not the batch's.
func (l *TriggerLoop) planOne(t *axtype.DueTrigger) (f *jobFire, err error) {
	defer func() {
		if p := recover(); p != nil {
			f, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	if t.Paused {
		return l.planPaused(t)
	}
	plan, err := l.planner.plan(t, t.Now)
	if err != nil {
		return nil, err
	}
	f = &jobFire{jobID: t.JobID, skips: plan.skips, advance: &axtype.TriggerAdvance{JobID: t.JobID, NextFireAt: plan.next}}
	for _, pf := range plan.fires {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("error generating execution id: %w", err)
		}
		cause := axtype.CauseSchedule
		if pf.catchUp {
			cause = axtype.CauseCatchUp
		}
		by := firedBy(t.Triggers, dueWindow(t), pf.scheduledFor)
		f.executions = append(f.executions, &axtype.NewExecution{ID: id, JobID: t.JobID, Cause: cause,
			ScheduledFor: pf.scheduledFor, Misfired: pf.catchUp, TriggerIndex: &by})
		if pf.wait {
			f.waiting = append(f.waiting, id)
		}
	}
	f.replace = len(plan.fires) > 0 && t.ConcurrencyPolicy == axtype.ConcurrencyReplace && t.HasUnfinished
	return f, nil
}

// planPaused records the ticks of a paused job that have passed, as they
// pass, and moves its trigger to the next one.
func (l *TriggerLoop) planPaused(t *axtype.DueTrigger) (*jobFire, error) {
	skip := &skipRecorder{jobID: t.JobID}
	next, err := l.planner.skipStretch(t, t.NextFireAt, t.Now.Add(time.Nanosecond), skip, axtype.SkipPaused, PausedDetail)
	if err != nil {
		return nil, err
	}
	pausedAt := t.Now
	if t.PausedAt != nil {
		pausedAt = *t.PausedAt
	}
	return &jobFire{jobID: t.JobID, skips: skip.done(), pausedAt: &pausedAt,
		advance: &axtype.TriggerAdvance{JobID: t.JobID, NextFireAt: next}}, nil
}

// PausedDetail is the detail of the skip records of paused ticks.
const PausedDetail = "the job was paused"

// write stores the batch in tx: every fire in one pass when it can, the
// fires that fail set aside when it cannot, then the set-aside records.
func (b *batch) write(ctx context.Context, tx pgx.Tx) error {
	if err := b.writeIsolated(ctx, tx, b.fires); err != nil {
		return err
	}
	if len(b.setAside) > 0 {
		p := &db.TriggerSetAsideParams{}
		for _, s := range b.setAside {
			p.JobIDs = append(p.JobIDs, s.jobID)
			p.Reasons = append(p.Reasons, s.reason)
		}
		if err := db.TriggerSetAside(ctx, tx, p); err != nil {
			return err
		}
	}
	for _, f := range b.failed {
		if _, err := db.DelayedRunCancelMany(ctx, tx, []uuid.UUID{f.id}, f.reason); err != nil {
			return err
		}
	}
	if len(b.inserted) > 0 {
		return db.Notify(ctx, tx, notify.TaskReadyChannel, b.ready.Payload())
	}
	return nil
}

// writeIsolated writes fires under a savepoint. When that fails for a
// reason of the data (not of the connection or the database), it splits
// the fires in halves and writes each, down to single jobs, which are set
// aside: a batch with k failing jobs of n costs about 2k·log2(n)
// savepoints, and always ends.
func (b *batch) writeIsolated(ctx context.Context, tx pgx.Tx, fires []*jobFire) error {
	if len(fires) == 0 {
		return nil
	}
	var inserted []axtype.InsertedExecution
	err := pgx.BeginFunc(ctx, tx, func(sp pgx.Tx) error {
		var err error
		inserted, err = writeFires(ctx, sp, b.router, b.outbox, fires, &b.ready)
		return err
	})
	switch {
	case err == nil:
		b.inserted = append(b.inserted, inserted...)
		b.written = append(b.written, fires...)
		return nil
	case ctx.Err() != nil || db.Transient(err):
		return err
	case len(fires) == 1 && fires[0].delayedRun != uuid.Nil:
		b.failed = append(b.failed, failedRun{id: fires[0].delayedRun, reason: newSetAside(uuid.Nil, "", "firing it failed: "+err.Error()).reason})
		return nil
	case len(fires) == 1:
		b.setAside = append(b.setAside, newSetAside(fires[0].jobID, metrics.SetAsideWrite, "writing its fire failed: "+err.Error()))
		return nil
	}
	mid := len(fires) / 2
	if err := b.writeIsolated(ctx, tx, fires[:mid]); err != nil {
		return err
	}
	return b.writeIsolated(ctx, tx, fires[mid:])
}

// writeFires stores fires in tx: cancellations for replace first, so they
// never touch the new executions. It panics never: a panic in routing or
// the outbox comes back as an error.
// The fires' tasks are added to ready (a savepoint rolled back leaves
// them there: a poll woken for nothing looks, and sleeps again).
func writeFires(ctx context.Context, tx pgx.Tx, router *dispatch.TaskRouter, outbox *delivery.Outbox, fires []*jobFire,
	ready *notify.Targets) (inserted []axtype.InsertedExecution, err error) {
	defer func() {
		if p := recover(); p != nil {
			inserted, err = nil, fmt.Errorf("panic: %v", p)
		}
	}()
	var replaceJobs, delayedRuns []uuid.UUID
	var execs []*axtype.NewExecution
	var skips []*axtype.SkippedFire
	var advances []*axtype.TriggerAdvance
	for _, f := range fires {
		if f.replace {
			replaceJobs = append(replaceJobs, f.jobID)
		}
		execs = append(execs, f.executions...)
		if f.pausedAt != nil {
			for _, s := range f.skips {
				if err := db.SkippedFireRecordPaused(ctx, tx, s, *f.pausedAt); err != nil {
					return nil, err
				}
			}
		} else {
			skips = append(skips, f.skips...)
		}
		if f.advance != nil {
			advances = append(advances, f.advance)
		}
		if f.delayedRun != uuid.Nil {
			delayedRuns = append(delayedRuns, f.delayedRun)
		}
	}
	// A delayed run leaves its table in the transaction that fires it: it
	// fires once, and the row is held locked (claimed) until then.
	if err := db.DelayedRunDeleteMany(ctx, tx, delayedRuns); err != nil {
		return nil, err
	}
	if len(replaceJobs) > 0 {
		if _, err := db.ExecutionCancel(ctx, tx, nil, replaceJobs, "replaced by a newer fire"); err != nil {
			return nil, err
		}
	}
	if inserted, err = dispatch.InsertExecutions(ctx, tx, router, outbox, execs, ready); err != nil {
		return nil, err
	}
	keepInsertedAsLast(fires, inserted)
	if err := holdWaiting(ctx, tx, fires, inserted); err != nil {
		return nil, err
	}
	if err := db.SkippedFireInsertMany(ctx, tx, skips); err != nil {
		return nil, err
	}
	return inserted, db.TriggerAdvanceMany(ctx, tx, advances)
}

// QueueFullReason is the cancel reason of a run of a queue job that found
// another run waiting already when it was written (a manual trigger and a
// tick raced past the planner's check): at most one waits.
const QueueFullReason = "overlap_queue_full: a run of the job already waited behind the unfinished one"

// holdWaiting makes the inserted runs that the plan marked as waiting wait
// behind their jobs' unfinished runs, in the fire's transaction, and
// releases at once those whose run ended meanwhile. A run that finds
// another waiting is cancelled rather than run beside it.
func holdWaiting(ctx context.Context, tx pgx.Tx, fires []*jobFire, inserted []axtype.InsertedExecution) error {
	ok := make(map[uuid.UUID]bool, len(inserted))
	for _, e := range inserted {
		ok[e.ID] = true
	}
	var execIDs, jobIDs []uuid.UUID
	for _, f := range fires {
		for _, id := range f.waiting {
			if ok[id] {
				execIDs, jobIDs = append(execIDs, id), append(jobIDs, f.jobID)
			}
		}
	}
	if len(execIDs) == 0 {
		return nil
	}
	held, err := db.QueuedRunHoldMany(ctx, tx, execIDs, jobIDs)
	if err != nil {
		return err
	}
	var full []uuid.UUID
	for _, id := range execIDs {
		if !held[id] {
			full = append(full, id)
		}
	}
	if len(full) > 0 {
		if _, err := db.ExecutionCancel(ctx, tx, full, nil, QueueFullReason); err != nil {
			return err
		}
	}
	_, err = db.QueuedRunRelease(ctx, tx, jobIDs)
	return err
}

// keepInsertedAsLast points each trigger's last execution at the last one
// that was really inserted (a tick that had fired already was left out).
func keepInsertedAsLast(fires []*jobFire, inserted []axtype.InsertedExecution) {
	ok := make(map[uuid.UUID]bool, len(inserted))
	for _, e := range inserted {
		ok[e.ID] = true
	}
	for _, f := range fires {
		if f.advance == nil {
			continue
		}
		f.advance.LastExecutionID, f.advance.LastScheduledFor = uuid.Nil, time.Time{}
		for _, e := range f.executions {
			if ok[e.ID] {
				f.advance.LastExecutionID, f.advance.LastScheduledFor = e.ID, e.ScheduledFor
			}
		}
	}
}

func (b *batch) observe(m *metrics.Metrics) {
	misfired := map[uuid.UUID]bool{}
	for _, f := range b.written {
		for _, e := range f.executions {
			misfired[e.ID] = e.Misfired
			if e.Misfired {
				m.Misfire.Inc()
			}
		}
		for _, s := range f.skips {
			m.Skipped.WithLabelValues(string(s.Reason)).Add(float64(max(s.TickCount, 1)))
			if s.Reason == axtype.SkipMisfire {
				m.Misfire.Add(float64(max(s.TickCount, 1)))
			}
		}
	}
	delayed := map[uuid.UUID]bool{}
	for _, f := range b.written {
		if f.delayedRun != uuid.Nil {
			delayed[f.delayedRun] = true
		}
	}
	for _, e := range b.inserted {
		if delayed[e.ID] {
			m.Fires.WithLabelValues(string(axtype.CauseDelayed)).Inc()
			m.FireLag.Observe(max(e.FiredAt.Sub(e.ScheduledFor), 0).Seconds())
			continue
		}
		if misfired[e.ID] {
			m.Fires.WithLabelValues(string(axtype.CauseCatchUp)).Inc()
			continue
		}
		m.Fires.WithLabelValues(string(axtype.CauseSchedule)).Inc()
		// A fire made ahead is runnable at its tick: no lag.
		m.FireLag.Observe(max(e.FiredAt.Sub(e.ScheduledFor), 0).Seconds())
	}
	for _, s := range b.setAside {
		m.SetAside.WithLabelValues(s.step).Inc()
	}
}

// logSetAside says which jobs the batch set aside, and why.
func (b *batch) logSetAside(ctx context.Context, logger *slog.Logger) {
	for _, s := range b.setAside {
		logger.ErrorContext(ctx, "job set aside: it is not fired again until it is updated",
			"job_id", s.jobID, "step", s.step, "reason", s.reason)
	}
	for _, f := range b.failed {
		logger.ErrorContext(ctx, "delayed run cancelled: firing it failed", "execution_id", f.id, "reason", f.reason)
	}
}
