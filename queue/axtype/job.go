package axtype

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Job is a job definition joined with its trigger row.
type Job struct {
	ID              uuid.UUID
	Name            string
	Group           string
	Owner           string
	Description     string
	TriggerKind     TriggerKind
	CronExpr        string // set for cron triggers
	Timezone        string
	IntervalSeconds int64      // set for interval triggers
	RunAt           *time.Time // set for delay triggers
	// Triggers is the job's list when it has several (2 to MaxTriggers,
	// each cron or interval); the fields above then hold the first. nil:
	// the job has the one trigger of the fields above.
	Triggers []TriggerSpec
	// AfterMode and AfterUpstream are set for after triggers: the jobs it
	// runs after, and whether it waits for all of them or any.
	AfterMode     AfterMode
	AfterUpstream []AfterUpstream
	ExecutorKind  ExecutorKind
	Executor      ExecutorConfig
	TargetLabels  map[string]string
	RouteStrategy RouteStrategy
	RouteKey      string
	// ConcurrencyKey, when set, is the template of the key under which at
	// most ConcurrencyLimit of the job's tasks run at once (keys of the
	// jobs of one ConcurrencyGroup share their limits); see ConcurrencyScope.
	ConcurrencyKey   string
	ConcurrencyLimit int
	ConcurrencyGroup string
	ShardCount       int
	ShardParams      []string
	// ShardRangeFrom and ShardRangeTo bound the ranges that shards without
	// a parameter get: [0, 2^32) by default (FillDefaults).
	ShardRangeFrom int64
	ShardRangeTo   int64
	// ShardGenerator, when set, makes each run's shard params from the fire
	// instead of ShardParams or the range.
	ShardGenerator         *ShardGenerator
	Priority               int
	TimeoutSeconds         int
	RetryMaxAttempts       int
	RetryBackoffSeconds    int
	RetryBackoffMaxSeconds int
	ConcurrencyPolicy      ConcurrencyPolicy
	MisfirePolicy          MisfirePolicy
	MisfireWindowSeconds   int
	MisfireMaxFires        int
	RateLimitClass         string
	// DegradeAction is what the job's tasks do while their class's
	// priority floor is above them: wait (default) or skip.
	DegradeAction DegradeAction
	// TimeoutMode is fixed (every attempt gets TimeoutSeconds) or
	// adaptive (see Job.AdaptiveTimeout; TimeoutSeconds is then the ceiling).
	TimeoutMode TimeoutMode
	// HistoryRetentionSeconds and HistoryFailedRetentionSeconds keep the
	// job's ended runs (failed and timed-out ones: the second) this long
	// instead of the server's retention; 0: the server's.
	HistoryRetentionSeconds       int
	HistoryFailedRetentionSeconds int
	CallbackURL                   string
	// CallbackOrdered delivers the job's callbacks in sequence order: the
	// next waits until the one before is delivered or has failed for good.
	CallbackOrdered bool
	// ActiveFrom and ActiveUntil bound when the job's ticks fire:
	// [ActiveFrom, ActiveUntil), either end open when nil.
	ActiveFrom, ActiveUntil *time.Time
	// JitterSeconds delays each scheduled run's tasks by a deterministic
	// offset in [0, JitterSeconds) (ax.jitter_offset); 0: none.
	JitterSeconds int
	// Exclude names the calendars whose dates the job's ticks skip
	// (reason calendar); they are read at fire time.
	Exclude []string
	Params  json.RawMessage // object handed to every run
	// SigningSecret is set only in what JobService.Create returns: the
	// job's new whsec_ secret, shown once.
	SigningSecret string
	CreatedAt     time.Time
	UpdatedAt     time.Time

	// From the trigger row.
	NextFireAt       *time.Time
	Paused           bool
	PausedAt         *time.Time
	LastFireAt       *time.Time
	LastScheduledFor *time.Time
	LastExecutionID  *uuid.UUID
	LastState        ExecutionState // state of the last execution; "" before the first fire
	// SetAsideAt and SetAsideReason are set while the trigger loop does not
	// fire the job because a fire of it failed; an update clears them.
	SetAsideAt     *time.Time
	SetAsideReason string
	// PausedReason says why ax paused the job (it left its declaration
	// set); "" when it is not paused or was paused through the API.
	PausedReason string

	// ManagedBy names the declaration set the job belongs to ("" when it
	// is managed through the API); DeclaredVersion and DeclaredIn are the
	// version and the place of the declaration that last changed it.
	ManagedBy       string
	DeclaredVersion string
	DeclaredIn      string

	// TimeoutMeasure is the last measure of the job's history, from
	// ax.job_timeout_measure; nil before a fire of it as an adaptive job.
	TimeoutMeasure *TimeoutMeasure
}

// Agentless reports whether ax serve itself runs the job's tasks instead
// of an agent: an HTTP executor and no target labels, unless the job is
// broadcast (one task per agent). JobInsert and JobUpdate store the answer
// in job.agentless, which the tasks of each run copy.
func (j *Job) Agentless() bool {
	return j.ExecutorKind == ExecutorHTTP && len(j.TargetLabels) == 0 && j.RouteStrategy != RouteBroadcast
}

// FailingJob is a job with failed runs in the observed window.
type FailingJob struct {
	Name, Group, Owner  string
	Finished, Failed    int64 // runs that ended in the window, and failed ones
	ConsecutiveFailures int64 // latest runs in a row that failed
}

// MaxConcurrencyKeyBytes caps a rendered concurrency key: it is stored on
// every task and compared in every lease of its key.
const MaxConcurrencyKeyBytes = 256

// MaxTasksPerBatch bounds the tasks one batch of fires writes (the
// trigger loop's transaction): 500 delayed runs of a job of 10,000 shards
// due together made 5 million tasks in one, past any statement timeout,
// and failing, the same batch was claimed again and no other job's fire
// went through. A batch leaves the jobs and runs past it for the next
// pass (it writes at least one), and a job's fire_all catch-up (max_fires
// runs of all its shards) may not exceed it.
const MaxTasksPerBatch = 50_000

// MaxParamsBytes bounds a run's params: as sent (a job's, and a run's
// overlay of them) and as a downstream job's templates render them.
// Params travel with every lease of every task and into the HTTP body
// and callback of every run.
const MaxParamsBytes = 256 << 10

// MaxConcurrencyLimit caps a job's concurrency limit (ax.job's check).
const MaxConcurrencyLimit = 10000

// ConcurrencyScope is where a job's concurrency keys count: its
// concurrency group's within its job group (shared by the jobs of both),
// else its own. Within its job group: a concurrency group named the same
// by jobs of every group let a key limited to its own groups run tasks
// under another team's key, at a limit of its own choosing, and hold
// that team's places.
func ConcurrencyScope(jobID uuid.UUID, jobGroup, concurrencyGroup string) string {
	if concurrencyGroup != "" {
		return "group:" + jobGroup + "/" + concurrencyGroup
	}
	return "job:" + jobID.String()
}
