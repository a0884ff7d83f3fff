package dispatch

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
)

// ReaperConfig tunes a Reaper.
type ReaperConfig struct {
	// Interval between sweeps. Defaults to 1 s.
	Interval time.Duration
	// OfflineAfter is how long an agent may be silent before it is
	// offline. Defaults to 3 heartbeat intervals of AgentConfig.
	OfflineAfter time.Duration
	// Live is how recently an agent must have heartbeated to take tasks
	// parked for want of one (TaskRouterConfig.Live, whose default it
	// shares: 2 heartbeat intervals of AgentConfig). Each sweep unparks
	// the tasks of up to UnparkJobs such jobs, UnparkTasks tasks at most.
	Live time.Duration
	// BatchSize bounds one sweep's expired leases. Defaults to 1000.
	BatchSize int
	// MaxLostLeases is how many times a task may lose its lease with its
	// agent (the agent offline, or silent for a whole lease) before it
	// fails with error "lost: …". Until then such a task runs again at
	// once, on another agent, without using up an attempt of its job's
	// retry policy: a dead agent is not the task's failure, but a task
	// that kills every agent it runs on must not go on forever. Defaults
	// to 3.
	MaxLostLeases int
	// TimeoutGrace is how long past its timeout a task an agent holds is
	// left to the agent before the reaper times it out: the agent counts
	// the timeout from when it started the task, a lease round trip after
	// the server's count began, then stops it (SIGTERM, up to its kill
	// grace of 5 s by default, then SIGKILL) and reports timed_out. Timed
	// out by the reaper first, the task would be retried, on another
	// agent perhaps, while it still runs, and its agent's report and last
	// logs refused. Tasks no agent holds get none. Defaults to
	// DefaultTimeoutGrace; negative: none.
	TimeoutGrace time.Duration
	// Quarantine says when an agent fails too often to get routed work:
	// defaults to a failure rate of 50% or more over at least 5 outcomes
	// within the last 5 minutes, the newest 100 of them at most.
	// Quarantine.ErrorShare (off by default) adds a lower bar for failures
	// whose error code is one of Quarantine.ErrorCodes.
	Quarantine axtype.QuarantinePolicy
	// RestoreAfter is how many probe tasks in a row a quarantined agent
	// must succeed to be active again. Defaults to 2.
	RestoreAfter int
	// HealthEvery is how often a sweep also judges the agents' health
	// (quarantine and restore). That check reads up to Quarantine.Sample
	// outcomes of every active agent, a cost that grows with the fleet
	// (64 ms a sweep with 200 busy agents), while a failure rate over
	// minutes moves little in a few seconds. Defaults to 5 s; every sweep
	// when shorter than Interval.
	HealthEvery time.Duration
	// ForgetEvery is how often this replica removes from its metrics the
	// series of agents gone offline (metrics.Metrics.ForgetAgents). Every
	// replica does, whichever marked them offline: each has series of the
	// agents it served. Defaults to 10 s.
	ForgetEvery time.Duration
	// Outbox enqueues the callbacks of executions a sweep ends; nil: none
	// (a replica running River flushes them later).
	Outbox *delivery.Outbox
	// Clock, when set, is the time sweeps judge leases, timeouts and
	// silent agents by (tests that move time forward); nil: the
	// database's now().
	Clock   *clock.Clock
	Logger  *slog.Logger
	Metrics *metrics.Metrics
}

// Reaper returns leases lost with their agent to pending on the same
// attempt (up to MaxLostLeases), other expired leases to pending (attempt
// + 1, after backoff) or fails them when attempts are spent, times out
// overdue tasks, finalizes their executions and marks silent agents
// offline. Every replica runs one; a transaction-scoped advisory lock lets
// one sweep at a time.
type Reaper struct {
	pool    *pgxpool.Pool
	cfg     ReaperConfig
	lease   time.Duration // an agent silent this long has lost its leases
	classes *RateClasses  // automatic degradation of rate classes

	healthMu  sync.Mutex
	healthDue time.Time // the next sweep at or after this judges health

	forgetDue time.Time // the loop forgets gone agents' series at or after this (its goroutine's)

	unparkMu    sync.Mutex
	unparkAfter uuid.UUID // the next sweep's unpark looks at the jobs after this one

	bg startstop.Runner
}

// reaperLockID is the advisory lock that serializes sweeps.
const reaperLockID = 0x61785f7265617072 // "ax_reapr"

// NewReaper returns a Reaper; agentCfg supplies the heartbeat interval
// and the lease: an agent silent for a whole lease has lost its leases.
func NewReaper(pool *pgxpool.Pool, agentCfg AgentConfig, cfg ReaperConfig) *Reaper {
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.OfflineAfter = cmp.Or(cfg.OfflineAfter, 3*agentCfg.withDefaults().HeartbeatInterval)
	cfg.Live = cmp.Or(cfg.Live, 2*agentCfg.withDefaults().HeartbeatInterval)
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 1000)
	cfg.MaxLostLeases = cmp.Or(cfg.MaxLostLeases, DefaultMaxLostLeases)
	cfg.TimeoutGrace = max(cmp.Or(cfg.TimeoutGrace, DefaultTimeoutGrace), 0)
	cfg.Quarantine.Window = cmp.Or(cfg.Quarantine.Window, 5*time.Minute)
	cfg.Quarantine.Sample = cmp.Or(cfg.Quarantine.Sample, 100)
	cfg.Quarantine.MinResults = cmp.Or(cfg.Quarantine.MinResults, 5)
	cfg.Quarantine.FailureRate = cmp.Or(cfg.Quarantine.FailureRate, 0.5)
	cfg.RestoreAfter = cmp.Or(cfg.RestoreAfter, 2)
	cfg.HealthEvery = cmp.Or(cfg.HealthEvery, 5*time.Second)
	cfg.ForgetEvery = cmp.Or(cfg.ForgetEvery, 10*time.Second)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = metrics.New(nil)
	}
	return &Reaper{pool: pool, cfg: cfg, lease: agentCfg.withDefaults().Lease, classes: NewRateClasses(pool, cfg.Logger)}
}

// DefaultMaxLostLeases is ReaperConfig.MaxLostLeases's default.
const DefaultMaxLostLeases = 3

// DefaultTimeoutGrace is ReaperConfig.TimeoutGrace's default: an agent's
// default kill grace (5 s), the 2 s it then waits for the task's last
// output, and 3 s for the lease's and the report's round trips.
const DefaultTimeoutGrace = 10 * time.Second

// Start sweeps in the background until Stop.
func (r *Reaper) Start(ctx context.Context) error {
	r.bg.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		for {
			if err := r.Sweep(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.ErrorContext(ctx, "error reaping", "error", err)
			}
			if now := time.Now(); !now.Before(r.forgetDue) {
				r.forgetDue = now.Add(r.cfg.ForgetEvery)
				if err := r.ForgetGoneAgents(ctx); err != nil && ctx.Err() == nil {
					r.cfg.Logger.ErrorContext(ctx, "error forgetting the metrics of agents gone", "error", err)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	return nil
}

// Stop ends sweeping. Safe to call twice or without Start.
func (r *Reaper) Stop() { r.bg.Stop() }

// Sweep runs one pass, unless another replica is sweeping right now.
// Tasks below their class's floor are held and released after its
// transaction, each in one of their own (RateClasses.moveHeld).
func (r *Reaper) Sweep(ctx context.Context) error {
	var swept bool
	err := db.WithTx(ctx, r.pool, func(tx pgx.Tx) error {
		leader, err := db.TryXactLock(ctx, tx, reaperLockID)
		if err != nil || !leader {
			return err
		}
		swept = true
		offline, err := db.AgentMarkOffline(ctx, tx, r.cfg.OfflineAfter, r.cfg.Clock.Now())
		if err != nil {
			return err
		}
		for _, id := range offline {
			r.cfg.Logger.WarnContext(ctx, "agent offline: silent too long", "agent_id", id)
		}
		if err := r.checkHealth(ctx, tx); err != nil {
			return err
		}
		if err := r.classes.degradeByPressure(ctx, tx); err != nil {
			return err
		}
		reaped, err := db.TaskReapExpired(ctx, tx, axtype.ReapPolicy{Max: r.cfg.BatchSize, SilentFor: r.lease,
			MaxLostLeases: r.cfg.MaxLostLeases, TimeoutGrace: r.cfg.TimeoutGrace, Now: r.cfg.Clock.Now()})
		if err != nil {
			return err
		}
		r.record(ctx, reaped)
		orphaned, err := db.TaskFailPinnedOfOffline(ctx, tx, r.cfg.BatchSize, r.cfg.Clock.Now())
		if err != nil {
			return err
		}
		if orphaned > 0 {
			r.cfg.Logger.WarnContext(ctx, "tasks pinned to agents gone offline failed", "runs", orphaned)
		}
		if err := r.cfg.Outbox.Flush(ctx, tx); err != nil {
			return err
		}
		unparked, err := r.unparkServed(ctx, tx)
		if err != nil {
			return err
		}
		moved, err := db.TaskPoolCatchUp(ctx, tx)
		if err != nil {
			return err
		}
		if reaped.Retried > 0 || unparked > 0 || moved > 0 {
			return db.Notify(ctx, tx, notify.TaskReadyChannel, "")
		}
		return nil
	})
	if err != nil || !swept {
		return err
	}
	return r.classes.moveHeld(ctx)
}

// Unpark bounds: jobs looked at and tasks unparked by one sweep, so a
// sweep stays short with many parked jobs or a large parked backlog; the
// rest are the next sweeps' (a second later by default).
const (
	UnparkJobs  = 1000
	UnparkTasks = 10_000
)

// unparkServed unparks the tasks parked for want of an agent whose jobs
// a live agent can take now, going through the parked jobs a part each
// sweep (after the last one looked at; from the first once through), and
// returns how many it unparked.
func (r *Reaper) unparkServed(ctx context.Context, tx pgx.Tx) (int, error) {
	r.unparkMu.Lock()
	defer r.unparkMu.Unlock()
	u, err := db.TaskNoAgentUnpark(ctx, tx, r.unparkAfter, UnparkJobs, UnparkTasks, r.cfg.Live, r.cfg.Clock.Now())
	if err != nil {
		return 0, err
	}
	switch {
	case u.Unparked >= UnparkTasks: // the same jobs again: some have more
	case u.Jobs < UnparkJobs:
		r.unparkAfter = uuid.Nil
	default:
		r.unparkAfter = u.LastJob
	}
	if u.Unparked > 0 {
		r.cfg.Logger.InfoContext(ctx, "tasks an agent can take now unparked", "tasks", u.Unparked)
	}
	return u.Unparked, nil
}

// ForgetGoneAgents removes from this replica's metrics the series of the
// agents they have series of that are gone: offline, or not agents at all.
// Run by every replica's loop, every ForgetEvery.
func (r *Reaper) ForgetGoneAgents(ctx context.Context) error {
	var ids []uuid.UUID
	for _, s := range r.cfg.Metrics.AgentSeries() {
		if id, err := uuid.Parse(s); err == nil {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	gone, err := db.AgentListGone(ctx, r.pool, ids)
	if err != nil {
		return err
	}
	forget := make([]string, len(gone))
	for i, id := range gone {
		forget[i] = id.String()
	}
	r.cfg.Metrics.ForgetAgents(forget)
	return nil
}

// record counts and logs what a sweep reaped.
func (r *Reaper) record(ctx context.Context, reaped axtype.Reaped) {
	r.cfg.Metrics.LeaseExpiries.Add(float64(reaped.Expired))
	r.cfg.Metrics.LostLeases.Add(float64(reaped.Lost))
	r.cfg.Metrics.TaskResults.Add(string(axtype.TaskTimedOut), axtype.ErrorCodeTimeout, float64(reaped.TimedOut))
	r.cfg.Metrics.Retries.Add(float64(reaped.Retried - (reaped.Lost - reaped.LostOut)))
	if reaped.Expired+reaped.TimedOut > 0 {
		r.cfg.Logger.InfoContext(ctx, "reaped leases", "expired", reaped.Expired, "timed_out", reaped.TimedOut,
			"retried", reaped.Retried, "lost", reaped.Lost, "lost_out", reaped.LostOut)
	}
}

// checkHealth quarantines agents that fail too often and restores those
// whose probes succeed again, when HealthEvery has passed since it last
// did (by the sweep's clock).
func (r *Reaper) checkHealth(ctx context.Context, tx pgx.Tx) error {
	now := time.Now()
	if t := r.cfg.Clock.Now(); t != nil {
		now = *t
	}
	r.healthMu.Lock()
	due := !now.Before(r.healthDue)
	if due {
		r.healthDue = now.Add(r.cfg.HealthEvery)
	}
	r.healthMu.Unlock()
	if !due {
		return nil
	}
	failing, err := db.AgentQuarantineFailing(ctx, tx, r.cfg.Quarantine)
	if err != nil {
		return err
	}
	for _, a := range failing {
		r.cfg.Metrics.AgentHealth.WithLabelValues(string(axtype.AgentQuarantined)).Inc()
		r.cfg.Logger.WarnContext(ctx, "agent quarantined: failing too often", "agent_id", a.ID,
			"failures", a.Failures, "matching_failures", a.Matching, "results", a.Results,
			"window", r.cfg.Quarantine.Window)
	}
	restored, err := db.AgentRestoreRecovered(ctx, tx, r.cfg.RestoreAfter)
	if err != nil {
		return err
	}
	for _, id := range restored {
		r.cfg.Metrics.AgentHealth.WithLabelValues("restored").Inc()
		r.cfg.Logger.InfoContext(ctx, "agent restored: probes succeeded", "agent_id", id,
			"probes", r.cfg.RestoreAfter)
	}
	return nil
}
