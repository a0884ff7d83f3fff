package axtype

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Task is one shard of an execution.
type Task struct {
	ID                uuid.UUID
	ExecutionID       uuid.UUID
	JobID             uuid.UUID
	ShardIndex        int
	ShardTotal        int
	ShardParam        string
	State             TaskState
	Priority          int
	Attempt           int
	MaxAttempts       int
	LostLeases        int // leases lost with their agent: runs again that used up no attempt
	TimeoutSeconds    int
	NotBefore         time.Time
	AgentID           *uuid.UUID // the agent of the last lease (nil: never leased, or sent by ax itself)
	LeasedAt          *time.Time // the last attempt's lease
	StartedAt         *time.Time // the last attempt's first heartbeat: nil when it ended before one
	FinishedAt        *time.Time
	CancelRequestedAt *time.Time
	Result            json.RawMessage
	Error             string
	ErrorCode         string // "" when the outcome carried none (see MaxErrorCodeLength)
	CreatedAt         time.Time
	UpdatedAt         time.Time
	// ResultOmitted: the task has a result or error that a listing of its
	// run left out (MaxListedResults, MaxListedResultBytes).
	ResultOmitted bool
}

// A listing of a run's tasks gives the results and errors of at most
// MaxListedResults tasks, as many as MaxListedResultBytes hold (the first
// whatever its size): the rest are omitted, and a listing may start
// further on. A run of 10,000 shards with results of 1 MiB was 10 GB in
// one answer.
const (
	MaxListedResults     = 1000
	MaxListedResultBytes = 8 << 20
)

// NewTask is a task just made, with what routing needs to place it.
type NewTask struct {
	ID, ExecutionID, JobID uuid.UUID
	JobName, JobGroup      string
	ShardIndex, ShardTotal int
	ShardParam             string
	Pinned                 bool // a broadcast task, made for one agent
	Agentless              bool // an HTTP task ax serve sends itself; agents never lease it
	RouteStrategy          RouteStrategy
	ExecutorKind           ExecutorKind // shell, http or handler: only agents accepting it are routed to
	RouteKey               string       // the job's template
	TargetLabels           map[string]string
	Params                 json.RawMessage
	// ConcurrencyTemplate is the job's concurrency key template ("": none)
	// with its limit and scope (ConcurrencyScope); the RouteFunc renders
	// it into ConcurrencyKey, or says in ConcurrencyError why it could not
	// (the task is then written failed).
	ConcurrencyTemplate string
	ConcurrencyLimit    int
	ConcurrencyScope    string
	ConcurrencyKey      string
	ConcurrencyError    string
	// Preferred is the agent the task was written routed to (its pinned
	// agent, or routing's choice); uuid.Nil: any matching agent may take
	// it at once.
	Preferred uuid.UUID
	// NotBefore is when it was written leasable from (the database's
	// clock).
	NotBefore time.Time
}

// TaskRoute is one routing decision; nil agent ids mean no preference.
type TaskRoute struct {
	TaskID              uuid.UUID
	Preferred, Fallback uuid.UUID
	RouteKey            string
	// NoAgent: no live agent could take the task (none has the job's
	// labels and accepts its executor kind). It is written parked, out of
	// every lease's way, until one can (db.TaskNoAgentUnpark).
	NoAgent bool
}

// RouteFunc decides the preferred agents of new tasks before they are
// written (ExecutionInsertMany): a route per routed task; a task without
// one is unassigned, any matching agent may take it. It also renders the
// tasks' concurrency keys (NewTask.ConcurrencyKey).
type RouteFunc func(ctx context.Context, tasks []*NewTask) ([]TaskRoute, error)

// LeasedTask is a task handed to an agent, with what running it needs.
type LeasedTask struct {
	ID             uuid.UUID
	ExecutionID    uuid.UUID
	JobID          uuid.UUID
	ShardIndex     int
	ShardTotal     int
	ShardParam     string
	Attempt        int
	MaxAttempts    int
	TimeoutSeconds int
	LeaseToken     uuid.UUID
	LeaseExpiresAt time.Time
	// Deadline is when the attempt times out at the earliest: its lease
	// plus its timeout (the reaper counts from the first heartbeat).
	Deadline     time.Time
	ExecutorKind ExecutorKind
	Executor     ExecutorConfig
	Params       json.RawMessage
	ScheduledFor time.Time
	JobName      string
	JobGroup     string
	RoutedHere   bool          // the task was routed to this agent (or unassigned)
	ReadyAt      time.Time     // when it became leasable
	Waited       time.Duration // from ReadyAt to its lease, by the database clock: pickup latency
	RateClass    string
	Priority     int
	TraceParent  string // the run's W3C trace context
	// Secrets are the job's signing secrets (current first), for an HTTP
	// task: set by the lease broker, never logged.
	Secrets []string
}

// LeaseAgent is one agent's ask in a lease batch (dispatch.LeaseBatch).
type LeaseAgent struct {
	ID         uuid.UUID
	Labels     map[string]string
	Executors  []string // empty: DefaultExecutors
	LabelBound bool
	Max        int
}

// LeaseSteal says who may take a picked task: LeaseStealNone, only its
// preferred agent (anyone, when it has none); LeaseStealRunnerUp, its
// runner-up too; LeaseStealAny, anyone.
type LeaseSteal int

const (
	LeaseStealNone LeaseSteal = iota
	LeaseStealRunnerUp
	LeaseStealAny
)

// LeaseCandidate is a task a lease picked and locked, not yet handed to
// an agent.
type LeaseCandidate struct {
	ID, ExecutionID  uuid.UUID
	RateClass        string // "": none
	PreferredAgentID *uuid.UUID
	FallbackAgentID  *uuid.UUID // the runner-up of a keyed task
	Steal            LeaseSteal
	// ConcurrencyKey is the task's rendered concurrency key ("": none),
	// held to ConcurrencyLimit among the tasks of ConcurrencyScope.
	ConcurrencyKey, ConcurrencyScope string
	ConcurrencyLimit                 int
	// ParamsBytes is the size of its run's params (0: none): what it
	// adds to the lease's answer, held to MaxLeaseParamsBytes.
	ParamsBytes int
}

// MaxLeaseParamsBytes bounds the run params one agent's lease hands
// out, over its tasks (each task carries its run's params), and
// MaxLeaseBatchParamsBytes those of a batch of agents' leases (one
// statement's answer). An agent's first task is handed out whatever
// its params: one lease of 1,000 tasks of a run with params of 256 KiB
// answered 256 MB, read and written by a replica that serves every
// other agent too.
const (
	MaxLeaseParamsBytes      = 4 << 20
	MaxLeaseBatchParamsBytes = 16 << 20
)

// TaskRef names a leased task with its fencing token.
type TaskRef struct {
	ID    uuid.UUID
	Token uuid.UUID
}

// RenewedTask is a lease a heartbeat extended.
type RenewedTask struct {
	ID             uuid.UUID
	Cancel         bool // the agent should stop it (cancelled or timed out)
	LeaseExpiresAt time.Time
}

// TaskResult is an outcome reported by an agent.
type TaskResult struct {
	TaskRef
	State  TaskState // succeeded, failed or cancelled
	Result json.RawMessage
	Error  string
	// ErrorCode is the outcome's machine-readable reason ("" for none):
	// exit_3, signal_killed, http_503, connect, timeout… It must pass
	// ValidErrorCode; the database refuses anything else.
	ErrorCode string
}

// CompletedTask is a result that was recorded; State is the task's state
// afterwards (pending when a failure will be retried).
type CompletedTask struct {
	ID          uuid.UUID
	ExecutionID uuid.UUID
	State       TaskState
	ErrorCode   string // as recorded ("" for none)
	// Error is the reason of an ErrorCodeBadResult, or of an
	// ErrorCodeResultTooLarge the server gave ("" otherwise).
	Error string
	// Finalized is true when this result ended its execution.
	Finalized bool
}

// LogChunk is output of a task.
type LogChunk struct {
	TaskRef
	Stream string
	Data   string
}

// Reaped counts what one reaper sweep did.
type Reaped struct {
	Expired  int // leases that ran out (agent dead or partitioned)
	TimedOut int // tasks past their timeout
	Retried  int // of both, tasks pending again (another attempt, or the same after a lost lease)
	Lost     int // of the expired, leases lost with their agent (offline or silent)
	LostOut  int // of the lost, tasks failed because their lost leases reached the cap
}

// ReapPolicy says how TaskReapExpired judges what it reaps.
type ReapPolicy struct {
	// Max bounds the tasks one call reaps.
	Max int
	// SilentFor is how long an agent not yet offline must have been
	// silent for its expired leases to count as lost with it (a lease).
	SilentFor time.Duration
	// MaxLostLeases is the lost lease that fails a task (error "lost: …")
	// instead of running it again on the same attempt.
	MaxLostLeases int
	// TimeoutGrace is how long past its timeout a task an agent holds is
	// left to its agent, which stops it and reports timed_out itself.
	TimeoutGrace time.Duration
	// Now, when set, replaces the database clock (tests).
	Now *time.Time
}

// LeaseOutlook is what a waiting long poll needs to know of its agent.
type LeaseOutlook struct {
	State AgentState // the agent's state now
	Ready bool       // whether it said it takes work
	// Next is how long until the earliest task it could lease becomes
	// leasable: labels, routing, steal delays, class floors and tokens
	// considered (an hour when none).
	Next time.Duration
	// KeysFreed says concurrency keys freed places that no lease has
	// unparked their waiting tasks into yet: a lease is due now.
	KeysFreed bool
}

// Backlog is the ready pending tasks of one rate class ("" for none) and
// priority.
type Backlog struct {
	Class      string
	Priority   int
	Depth      int64
	OldestWait time.Duration
}

// ConcurrencyWaiting is, for one concurrency scope (a group, or one job's
// keys as job:<group>/<name>), the keys at their limit with ready tasks
// waiting, and those tasks.
type ConcurrencyWaiting struct {
	Scope       string
	KeysAtLimit int64
	Waiting     int64
}

// HTTPTask is an agentless HTTP task leased by ax serve, with what its
// request needs.
type HTTPTask struct {
	ID, ExecutionID, JobID uuid.UUID
	ShardIndex, ShardTotal int
	ShardParam             string
	Attempt, MaxAttempts   int
	TimeoutSeconds         int
	// Token fences the result: it is the completion token a target that
	// answers 202 sends back.
	Token        uuid.UUID
	Deadline     time.Time // by the database clock
	Executor     ExecutorConfig
	JobName      string
	Params       json.RawMessage
	ScheduledFor time.Time
	Priority     int
	TraceParent  string   // W3C trace context of the run ("" when none)
	Secrets      []string // current first
}

// HTTPTaskState is where a task stands, by the database clock.
type HTTPTaskState struct {
	State     TaskState
	Attempt   int
	Agentless bool
	// HTTP: a task of an http job, sent by ax serve (agentless) or by an
	// agent; its target may post its result with the lease token.
	HTTP           bool
	NotBefore      time.Time
	Deadline       time.Time // meaningful while leased or running
	ExecutionID    uuid.UUID
	TimeoutSeconds int
	Priority       int
	// TokenWait is how long until its rate class has a token (0: it has
	// one, or the task has no class).
	TokenWait time.Duration
	Now       time.Time
}
