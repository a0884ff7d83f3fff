package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/history"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/outbound"
)

// River queues of ax's own work.
const (
	callbackQueue    = "ax_callback"
	httpQueue        = "ax_http"
	maintenanceQueue = "ax_maintenance"
)

// RiverConfig configures the work ax serve does itself on River: callback
// delivery, agentless HTTP tasks and their maintenance.
type RiverConfig struct {
	// Policy says which destinations callbacks and HTTP tasks may reach;
	// its Timeout bounds one callback attempt (default 30 s). HTTP tasks are
	// bounded by their own timeout.
	Policy   outbound.Policy
	Callback CallbackConfig
	HTTP     HTTPTaskConfig
	// CallbackWorkers and HTTPWorkers are how many deliveries and requests
	// one replica runs at once. Default to 100 each. HTTP.MaxPerJob and
	// HTTP.MaxPerHost bound one job's and one host's share of them.
	CallbackWorkers int
	HTTPWorkers     int
	// PollInterval is the precision with which a job snoozed for less
	// than River's scheduler interval (5 s) starts: an agentless HTTP
	// request fired ahead of its time, a callback's retry. Defaults to
	// 100 ms. River finds such a job only by fetching after its time, so
	// the replica tells its producers to fetch then (riverWaker). Fetches
	// follow each other at least min(10 ms, PollInterval) apart (River's
	// default of 100 ms would cap a replica near 10 fetches of at most
	// CallbackWorkers jobs a second).
	PollInterval time.Duration
	// FallbackPoll is how often River polls each queue for what a lost
	// notification leaves (a replica stopped before its wake). Defaults
	// to a second, and is at least PollInterval. Every poll of an empty
	// queue is a transaction: ax polled its three queues every 100 ms,
	// idle or not, before the wakes.
	FallbackPoll time.Duration
	// PollOnly keeps River from listening (its LISTEN connection would
	// not hold behind a transaction pooler): its producers fetch every
	// FallbackPoll and when the replica wakes them.
	PollOnly bool
	// FlushInterval is how often the leader enqueues callbacks that no
	// hook did. Defaults to 5 s.
	FlushInterval time.Duration
	// RescueInterval is how often the leader hands callback deliveries
	// still running past their timeout, and HTTP requests fetched and
	// never sent (their replica died), to another replica. Defaults to
	// 5 s.
	RescueInterval time.Duration
	// CleanupInterval is how often expired nonces, idempotency keys and
	// idle breakers are deleted, and what is past the history horizon
	// pruned (db.PruneGone). Defaults to 1 minute.
	CleanupInterval time.Duration
	// History is the retention maintenance runs with (history.Maintain,
	// a periodic job every History.Interval()).
	History history.Config
	// Version goes into the User-Agent of outbound requests.
	Version string
	// Logger defaults to discarding; the metrics default to unregistered.
	Logger          *slog.Logger
	Metrics         *metrics.Metrics
	OutboundMetrics *metrics.OutboundMetrics
}

func (c RiverConfig) withDefaults() RiverConfig {
	c.Callback = c.Callback.withDefaults()
	c.HTTP = c.HTTP.withDefaults()
	c.CallbackWorkers = cmp.Or(c.CallbackWorkers, 100)
	c.HTTPWorkers = cmp.Or(c.HTTPWorkers, 100)
	c.HTTP.MaxPerJob = cmp.Or(c.HTTP.MaxPerJob, max(1, c.HTTPWorkers/4))
	c.HTTP.MaxPerHost = cmp.Or(c.HTTP.MaxPerHost, max(1, c.HTTPWorkers/2))
	c.PollInterval = cmp.Or(c.PollInterval, 100*time.Millisecond)
	c.FallbackPoll = max(cmp.Or(c.FallbackPoll, time.Second), c.PollInterval)
	c.FlushInterval = cmp.Or(c.FlushInterval, 5*time.Second)
	c.CleanupInterval = cmp.Or(c.CleanupInterval, time.Minute)
	c.RescueInterval = cmp.Or(c.RescueInterval, 5*time.Second)
	c.Version = cmp.Or(c.Version, "dev")
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.History.Logger == nil {
		c.History.Logger = c.Logger
	}
	c.History = c.History.WithDefaults()
	if c.Metrics == nil {
		c.Metrics = metrics.New(nil)
	}
	if c.OutboundMetrics == nil {
		c.OutboundMetrics = metrics.NewOutboundMetrics(nil)
	}
	return c
}

// RiverService runs ax's own River client on the pool (schema ax): its
// Outbox inserts jobs in the caller's transactions; once started, its
// workers deliver callbacks and send agentless HTTP tasks. Every replica
// runs one; River elects a leader among them for periodic work.
type RiverService struct {
	client *river.Client[pgx.Tx]
	outbox *Outbox
	waker  *riverWaker

	mu      sync.Mutex
	started bool
}

// NewRiverService builds the client and its workers; nothing runs before
// Start, and an unstarted service still inserts jobs.
func NewRiverService(pool *pgxpool.Pool, cfg RiverConfig) (*RiverService, error) {
	cfg = cfg.withDefaults()
	if err := errors.Join(cfg.Callback.validate(), cfg.HTTP.validate()); err != nil {
		return nil, err
	}
	s := &RiverService{outbox: &Outbox{logger: cfg.Logger}}
	workers, err := s.workers(pool, cfg)
	if err != nil {
		return nil, err
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Schema:  db.Schema,
		Workers: workers,
		Queues: map[string]river.QueueConfig{
			callbackQueue: {MaxWorkers: cfg.CallbackWorkers}, httpQueue: {MaxWorkers: cfg.HTTPWorkers},
			maintenanceQueue: {MaxWorkers: 2},
		},
		PeriodicJobs: periodicJobs(cfg),
		// Work is bounded per kind (the workers' Timeout): callbacks by
		// the attempt's timeout, HTTP requests by theirs. River's rescuer
		// takes what is still running past that plus a margin (instead
		// of its default of an hour); ax's own pass (rescueArgs) takes
		// callbacks sooner than River's 30 s rescuer interval allows.
		JobTimeout:           river.JobTimeoutDefault,
		RescueStuckJobsAfter: max(river.JobTimeoutDefault, callbackJobTimeout(callbackAttemptTimeout(cfg))) + rescueMargin,
		// The process id in River's attempted_by says which replica runs
		// (or ran) a job.
		ID:                riverClientID(),
		FetchPollInterval: cfg.FallbackPoll,
		PollOnly:          cfg.PollOnly,
		FetchCooldown:     min(10*time.Millisecond, cfg.PollInterval),
		// River's own lines at info (producer job counts every few
		// seconds, elections, queue starts) are noise in a service log;
		// warnings and errors still come through.
		Logger: slog.New(minLevel{Handler: cfg.Logger.Handler(), min: slog.LevelWarn}),
	})
	if err != nil {
		return nil, fmt.Errorf("error creating river client: %w", err)
	}
	s.client, s.outbox.client = client, client
	// River makes a job snoozed for less than its scheduler's interval
	// (5 s) available at once with its time in the future, and a producer
	// finds it only by fetching after that time (river v0.51.2,
	// internal/jobexecutor/job_executor.go); longer snoozes are its
	// scheduler's, which notifies the producers itself.
	s.waker = newRiverWaker(client, pool, cfg.PollInterval, cfg.Logger)
	return s, nil
}

// workers registers the workers with their outbound clients.
func (s *RiverService) workers(pool *pgxpool.Pool, cfg RiverConfig) (*river.Workers, error) {
	callbacks, err := outbound.NewClient(cfg.Policy)
	if err != nil {
		return nil, err
	}
	httpPolicy := cfg.Policy
	// The client never cuts a request before its task's own timeout does.
	httpPolicy.Timeout = MaxAgentlessHTTPTimeout
	requests, err := outbound.NewClient(httpPolicy)
	if err != nil {
		return nil, err
	}
	agent := "ax/" + cfg.Version
	workers := river.NewWorkers()
	// Callbacks and notices share the callback workers, and so one
	// replica's slots per host (CallbackConfig.MaxPerHost).
	hosts := &hostSlots{}
	river.AddWorker(workers, &callbackWorker{pool: pool, client: callbacks, cfg: cfg.Callback, logger: cfg.Logger, outbox: s.outbox, hosts: hosts,
		timeout: callbackJobTimeout(callbackAttemptTimeout(cfg)),
		metrics: cfg.OutboundMetrics, agent: agent + " (callback)",
		breaker: &breaker{pool: pool, cfg: cfg.Callback, logger: cfg.Logger, metrics: cfg.OutboundMetrics}})
	river.AddWorker(workers, &noticeWorker{pool: pool, client: callbacks, cfg: cfg.Callback, logger: cfg.Logger, hosts: hosts,
		timeout: callbackJobTimeout(callbackAttemptTimeout(cfg)), agent: agent + " (notice)"})
	river.AddWorker(workers, &httpTaskWorker{pool: pool, client: requests, cfg: cfg.HTTP, outbox: s.outbox,
		logger: cfg.Logger, metrics: cfg.Metrics, out: cfg.OutboundMetrics, agent: agent + " (http task)"})
	river.AddWorker(workers, &flushWorker{pool: pool, outbox: s.outbox})
	river.AddWorker(workers, &cleanupWorker{pool: pool, logger: cfg.Logger})
	river.AddWorker(workers, &rescueWorker{pool: pool, cfg: cfg,
		after: callbackJobTimeout(callbackAttemptTimeout(cfg)) + rescueMargin})
	river.AddWorker(workers, &historyWorker{pool: pool, cfg: cfg.History})
	return workers, nil
}

func periodicJobs(cfg RiverConfig) []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(cfg.FlushInterval),
			func() (river.JobArgs, *river.InsertOpts) { return flushArgs{}, oncePer(cfg.FlushInterval) },
			&river.PeriodicJobOpts{ID: "ax_outbox_flush", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cfg.CleanupInterval),
			func() (river.JobArgs, *river.InsertOpts) { return cleanupArgs{}, oncePer(cfg.CleanupInterval) },
			&river.PeriodicJobOpts{ID: "ax_cleanup", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cfg.RescueInterval),
			func() (river.JobArgs, *river.InsertOpts) { return rescueArgs{}, oncePer(cfg.RescueInterval) },
			&river.PeriodicJobOpts{ID: "ax_rescue", RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(cfg.History.Interval()),
			func() (river.JobArgs, *river.InsertOpts) { return historyArgs{}, nil },
			&river.PeriodicJobOpts{ID: "ax_history", RunOnStart: true}),
	}
}

// oncePer makes a periodic job unique within its interval (at least a
// second, River's least), not while one is running: a replica killed
// while it ran one (or River's completer had not yet recorded its end)
// leaves it running until River's rescuer takes it, up to 100 s later
// (RescueStuckJobsAfter and River's 30 s interval), and unique by state
// no other was enqueued until then: no rescue of the dead replica's
// callbacks and HTTP requests, and no outbox flush. Runs of these may
// overlap; each is a pass that is safe twice. (History maintenance keeps
// one at a time: a late one costs nothing, and its passes can be long.)
func oncePer(interval time.Duration) *river.InsertOpts {
	return &river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: max(interval, time.Second)}}
}

// callbackAttemptTimeout is how long one callback attempt may take.
func callbackAttemptTimeout(cfg RiverConfig) time.Duration {
	return cmp.Or(cfg.Policy.Timeout, outbound.DefaultTimeout)
}

// riverClientID names this replica's River client: host, process id and
// start time (River's own default has no process id).
func riverClientID() string {
	host, _ := os.Hostname()
	host = strings.NewReplacer(".", "_", "-", "_").Replace(cmp.Or(host, "unknown_host"))
	return fmt.Sprintf("%.60s_pid%d_%s", host, os.Getpid(), time.Now().UTC().Format("2006_01_02T15_04_05_000000"))
}

// Outbox inserts jobs in callers' transactions.
func (s *RiverService) Outbox() *Outbox { return s.outbox }

// Start runs the workers until Stop.
func (s *RiverService) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("error starting river: %w", err)
	}
	s.waker.Start(ctx)
	s.started = true
	return nil
}

// Stop lets running deliveries finish (up to River's soft-stop timeout)
// and stops. Safe to call twice or without Start.
func (s *RiverService) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return
	}
	s.started = false
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.client.Stop(ctx)
	s.waker.Stop()
}

// flushArgs is the periodic job that enqueues callbacks no hook did.
type flushArgs struct{}

func (flushArgs) Kind() string { return "ax_outbox_flush" }

// InsertOpts: unique per interval (oncePer), given where it is enqueued.
func (flushArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: maintenanceQueue}
}

// pendingStates make a periodic job unique while one is waiting or
// running (history maintenance).
var pendingStates = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled}

type flushWorker struct {
	river.WorkerDefaults[flushArgs]
	pool   *pgxpool.Pool
	outbox *Outbox
}

func (w *flushWorker) Work(ctx context.Context, _ *river.Job[flushArgs]) error {
	return db.WithTx(ctx, w.pool, func(tx pgx.Tx) error { return w.outbox.Flush(ctx, tx) })
}

// cleanupArgs is the periodic job that deletes what expired.
type cleanupArgs struct{}

func (cleanupArgs) Kind() string { return "ax_cleanup" }

// InsertOpts: unique per interval (oncePer), given where it is enqueued.
func (cleanupArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: maintenanceQueue}
}

type cleanupWorker struct {
	river.WorkerDefaults[cleanupArgs]
	pool   *pgxpool.Pool
	logger *slog.Logger
}

func (w *cleanupWorker) Work(ctx context.Context, _ *river.Job[cleanupArgs]) error {
	nonces, err1 := db.NonceDeleteExpired(ctx, w.pool)
	keys, err2 := db.IdempotencyKeyDeleteExpired(ctx, w.pool)
	breakers, err3 := db.CallbackBreakerDeleteIdle(ctx, w.pool)
	slots, err4 := db.HTTPTaskSlotDeleteExpired(ctx, w.pool)
	cancelled, err5 := db.DelayedRunDeleteCancelled(ctx, w.pool)
	sessions, err6 := db.ConsoleSessionDeleteExpired(ctx, w.pool)
	if nonces+keys+breakers+slots+cancelled+sessions > 0 {
		w.logger.DebugContext(ctx, "expired records deleted", "nonces", nonces, "idempotency_keys", keys,
			"breakers", breakers, "http_task_slots", slots, "cancelled_delayed_runs", cancelled, "console_sessions", sessions)
	}
	pruned, err7 := db.PruneGone(ctx, w.pool, db.PruneBatch)
	if pruned.Total() > 0 {
		w.logger.InfoContext(ctx, "records of what is past the history horizon deleted", "agents", pruned.Agents,
			"notices", pruned.Notices, "backfill_runs", pruned.BackfillRuns, "reruns", pruned.Reruns,
			"after_waits", pruned.AfterWaits)
	}
	return errors.Join(err1, err2, err3, err4, err5, err6, err7)
}

// historyArgs is the periodic job that keeps history within its retention
// (history.Maintain): River runs periodic jobs on its leader only, so one
// replica at a time.
type historyArgs struct{}

func (historyArgs) Kind() string { return "ax_history" }

func (historyArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: maintenanceQueue, MaxAttempts: 1, UniqueOpts: river.UniqueOpts{ByState: pendingStates}}
}

type historyWorker struct {
	river.WorkerDefaults[historyArgs]
	pool *pgxpool.Pool
	cfg  history.Config
	// denied is set once a pass found its role may not make or drop
	// partitions, so that this is said once, not every pass.
	denied atomic.Bool
}

func (w *historyWorker) Work(ctx context.Context, _ *river.Job[historyArgs]) error {
	rep, err := history.Maintain(ctx, w.pool, w.cfg)
	if rep != nil && rep.NotOwner != "" {
		if w.cfg.NotOwner != nil {
			w.cfg.NotOwner.Set(1)
		}
		if !w.denied.Swap(true) {
			w.cfg.WithDefaults().Logger.WarnContext(ctx, "history maintenance may not make or drop partitions as this role: "+
				"run `ax maintain` as their owner at least daily, or ended runs will have no partition to go to "+
				"(see the managed Postgres guide)", "owner", rep.NotOwner)
		}
	} else if rep != nil && w.cfg.NotOwner != nil {
		w.cfg.NotOwner.Set(0)
	}
	return err
}

// minLevel is a handler that drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.Handler.Enabled(ctx, l)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{Handler: h.Handler.WithGroup(name), min: h.min}
}
