package axtype

// The types below mirror the enums of schema ax (see sql/schema.sql). sqlc
// generates its own types for them in db/internal/dbsqlc; the row structs
// of package db carry these instead, converted where rows are read and
// written, so callers compare against named constants, never literals.

// ExecutionState is the state of an execution, ax.execution_state.
type ExecutionState string

// Execution states.
const (
	ExecutionPending   ExecutionState = "pending"
	ExecutionRunning   ExecutionState = "running"
	ExecutionSucceeded ExecutionState = "succeeded"
	ExecutionFailed    ExecutionState = "failed"
	ExecutionTimedOut  ExecutionState = "timed_out"
	ExecutionCancelled ExecutionState = "cancelled"
)

// Ended reports whether an execution in state s has finished.
func (s ExecutionState) Ended() bool { return s != ExecutionPending && s != ExecutionRunning }

// TaskState is the state of one task (shard attempt), ax.task_state.
type TaskState string

// Task states.
const (
	TaskPending   TaskState = "pending"
	TaskLeased    TaskState = "leased"
	TaskRunning   TaskState = "running"
	TaskSucceeded TaskState = "succeeded"
	TaskFailed    TaskState = "failed"
	TaskTimedOut  TaskState = "timed_out"
	TaskCancelled TaskState = "cancelled"
)

// Ended reports whether a task in state s has finished.
func (s TaskState) Ended() bool {
	return s == TaskSucceeded || s == TaskFailed || s == TaskTimedOut || s == TaskCancelled
}

// ExecutionCause is why an execution exists, ax.execution_cause.
type ExecutionCause string

// Execution causes.
const (
	CauseSchedule ExecutionCause = "schedule" // an on-time tick
	CauseCatchUp  ExecutionCause = "catch_up" // a missed tick fired late under the misfire policy
	CauseManual   ExecutionCause = "manual"   // the trigger API
	CauseDelayed  ExecutionCause = "delayed"  // a delayed run (trigger or run API with run_at) that came due
	CauseRerun    ExecutionCause = "rerun"    // a re-run of an earlier run (its shards, or those that failed)
	CauseBackfill ExecutionCause = "backfill" // a past tick filled in by a backfill
	CauseAfter    ExecutionCause = "after"    // its upstream jobs' runs for its logical time ended
)

// TriggerKind is how a job fires, ax.trigger_kind.
type TriggerKind string

// Trigger kinds.
const (
	TriggerCron     TriggerKind = "cron"
	TriggerInterval TriggerKind = "interval"
	TriggerDelay    TriggerKind = "delay"
	TriggerManual   TriggerKind = "manual"
	TriggerAfter    TriggerKind = "after" // after runs of upstream jobs (ax.after_trigger)
)

// ExecutorKind is what runs a job's tasks, ax.executor_kind.
type ExecutorKind string

// Executor kinds.
const (
	ExecutorShell   ExecutorKind = "shell"
	ExecutorHTTP    ExecutorKind = "http"
	ExecutorHandler ExecutorKind = "handler"
)

// RouteStrategy picks the agent of a task, ax.route_strategy.
type RouteStrategy string

// Route strategies.
const (
	RouteRoundRobin     RouteStrategy = "round_robin"
	RouteRandom         RouteStrategy = "random"
	RouteWeighted       RouteStrategy = "weighted"
	RouteLeastActive    RouteStrategy = "least_active"
	RouteConsistentHash RouteStrategy = "consistent_hash"
	RouteLoadAware      RouteStrategy = "load_aware"
	RouteBroadcast      RouteStrategy = "broadcast"
	RouteFailover       RouteStrategy = "failover"
)

// ConcurrencyPolicy is what a fire does while the job's previous run is
// unfinished, ax.concurrency_policy.
type ConcurrencyPolicy string

// Concurrency policies.
const (
	ConcurrencyAllow   ConcurrencyPolicy = "allow"
	ConcurrencyForbid  ConcurrencyPolicy = "forbid"
	ConcurrencyReplace ConcurrencyPolicy = "replace"
	// ConcurrencyQueue: a fire during an unfinished run waits and starts
	// when that run ends; at most one waits (later fires are skipped as
	// SkipOverlapQueueFull).
	ConcurrencyQueue ConcurrencyPolicy = "queue"
)

// MisfirePolicy is what the trigger loop does with ticks it missed,
// ax.misfire_policy.
type MisfirePolicy string

// Misfire policies.
const (
	MisfireFireOnce MisfirePolicy = "fire_once"
	MisfireSkip     MisfirePolicy = "skip"
	MisfireFireAll  MisfirePolicy = "fire_all"
)

// DegradeAction is what a job's tasks do while their rate class's priority
// floor is above them, ax.degrade_action.
type DegradeAction string

// Degrade actions.
const (
	DegradeWait DegradeAction = "wait"
	DegradeSkip DegradeAction = "skip"
)

// TimeoutMode is how a job's tasks get their timeout, ax.timeout_mode.
type TimeoutMode string

// Timeout modes.
const (
	TimeoutFixed    TimeoutMode = "fixed"    // every attempt gets the job's timeout_seconds
	TimeoutAdaptive TimeoutMode = "adaptive" // from the job's history, see Job.AdaptiveTimeout
)

// SkipReason is why ticks did not fire, ax.skip_reason.
type SkipReason string

// Skip reasons.
const (
	SkipMisfire SkipReason = "misfire"
	SkipOverlap SkipReason = "overlap"
	SkipPaused  SkipReason = "paused"
	SkipDSTGap  SkipReason = "dst_gap"
	// SkipCalendar: the tick's date is in a calendar the job excludes.
	SkipCalendar SkipReason = "calendar"
	// SkipUpstreamFailed: an upstream run ended against its edge (after triggers).
	SkipUpstreamFailed SkipReason = "upstream_failed"
	// SkipOverlapQueueFull: a fire of a queue job while one of its runs
	// already waited behind an unfinished one.
	SkipOverlapQueueFull SkipReason = "overlap_queue_full"
	// SkipCascadeBound: a cascading re-run's cascade had made
	// MaxCascadeReruns re-runs; the downstream run was not re-run.
	SkipCascadeBound SkipReason = "cascade_bound"
)

// AgentState is the lifecycle state of an agent, ax.agent_state.
type AgentState string

// Agent states.
const (
	AgentActive      AgentState = "active"
	AgentDraining    AgentState = "draining"
	AgentOffline     AgentState = "offline"
	AgentQuarantined AgentState = "quarantined"
)

// CallbackState is the state of an execution's callback, ax.callback_state.
type CallbackState string

// Callback states.
const (
	CallbackPending   CallbackState = "pending"
	CallbackDelivered CallbackState = "delivered"
	CallbackFailed    CallbackState = "callback_failed"
)

// BreakerState is the state of a callback host's circuit breaker,
// ax.breaker_state.
type BreakerState string

// Breaker states.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// TaskEventKind is the kind of a task event, ax.task_event_kind.
type TaskEventKind string

// Task event kinds.
const (
	TaskEventState TaskEventKind = "state"
	TaskEventLog   TaskEventKind = "log"
)
