package queue

import (
	"cmp"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
)

// EngineConfig holds what the engine's services share.
type EngineConfig struct {
	// Pool is the database the engine works on: agents' leases and
	// results, HTTP tasks' completions. Required.
	Pool *pgxpool.Pool
	// RequestPool, when set, serves every other call (jobs, runs,
	// executions, keys, classes, history, authentication): a pool of
	// their own, so that requests do not queue behind the engine's
	// transactions when a burst of work holds all of Pool. Nil: Pool.
	RequestPool *pgxpool.Pool
	// Logger receives the services' logs. Defaults to discarding.
	Logger *slog.Logger
	// Metrics counts fires, dispatches and results. Nil: unregistered.
	Metrics *metrics.Metrics
	// Notifier wakes long-polling lease requests and waiters (nil makes
	// them poll) and tells of revoked API keys (KeyRevocations); it must
	// listen on notify.ServeChannels for that.
	Notifier *notify.Notifier
	// Agent tunes the agent protocol (lease length, heartbeat interval).
	Agent dispatch.AgentConfig
	// Router places the tasks of manual runs; nil leaves them unassigned.
	Router *dispatch.TaskRouter
	// Outbox enqueues callbacks and agentless HTTP tasks in the
	// transactions of the services' writes; nil: none (a replica running
	// River enqueues callbacks later; agentless tasks wait for one).
	Outbox *delivery.Outbox
	// Clock, when set, is the time the agent protocol leases and renews
	// by (tests that move time forward, sharing it with their Reaper);
	// nil: the database's now().
	Clock *clock.Clock
}

// Engine is the one door from the API and the console into the engine:
// its services, built once by NewEngine (ax serve's wiring) and handed to
// openapi.New, which builds none of its own.
type Engine struct {
	Keys         *KeyService
	SigningKeys  *SigningKeyService
	Idempotency  *IdempotencyStore
	Jobs         *JobService
	Executions   *ExecutionService
	Waiter       *ExecutionWaiter
	Declarations *DeclarationService
	Classes      *ClassService
	Calendars    *CalendarService
	History      *HistoryService
	Overview     *OverviewService
	Backfills    *BackfillService
	Callbacks    *CallbackService
	Notices      *NoticeService
	Completer    *TaskCompleter
	Leases       *LeaseBroker

	notifier *notify.Notifier
}

// NewEngine builds the engine's services on cfg.
func NewEngine(cfg EngineConfig) *Engine {
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))
	requests := cmp.Or(cfg.RequestPool, cfg.Pool)
	return &Engine{
		Keys:        NewKeyService(requests),
		SigningKeys: NewSigningKeyService(requests),
		Idempotency: NewIdempotencyStore(requests),
		Jobs:        NewJobService(requests, logger),
		Executions: NewExecutionService(requests, logger, cfg.Metrics).WithRouter(cfg.Router).WithOutbox(cfg.Outbox).
			WithNotifier(cfg.Notifier),
		Waiter:       NewExecutionWaiter(requests, cfg.Notifier),
		Declarations: NewDeclarationService(requests, logger, cfg.Metrics),
		Classes:      NewClassService(requests, logger),
		Calendars:    NewCalendarService(requests, logger),
		History:      NewHistoryService(requests),
		Overview:     NewOverviewService(requests),
		Backfills:    NewBackfillService(requests, logger, cfg.Outbox),
		Callbacks:    delivery.NewCallbackService(requests, cfg.Outbox, logger),
		Notices:      NewNoticeService(requests, logger),
		Completer:    delivery.NewTaskCompleter(cfg.Pool, cfg.Outbox, logger, cfg.Metrics),
		Leases: dispatch.NewLeaseBroker(cfg.Pool, cfg.Notifier, cfg.Agent, logger, cfg.Metrics).
			WithOutbox(cfg.Outbox).WithClock(cfg.Clock),
		notifier: cfg.Notifier,
	}
}

// KeyRevocations receives a value when an API key was revoked on any
// replica; nil without a notifier. The subscription lasts as long as the
// notifier.
func (e *Engine) KeyRevocations() <-chan struct{} {
	if e.notifier == nil {
		return nil
	}
	ch, _ := e.notifier.Subscribe(notify.APIKeyRevokedChannel)
	return ch
}
