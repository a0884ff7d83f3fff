package openapi

import (
	"time"
)

// Job is a job definition as the API shows and accepts it. Read-only
// fields are ignored in requests, so a client may PUT back what it got.
type Job struct {
	ID          string `json:"id,omitempty" readOnly:"true" format:"uuid" doc:"Job id (UUIDv7, so ids sort by creation)"`
	Name        string `json:"name" minLength:"1" maxLength:"200" example:"nightly-report" doc:"Name, unique within the group"`
	Group       string `json:"group,omitempty" maxLength:"200" default:"default" example:"billing" doc:"Group the job belongs to"`
	Owner       string `json:"owner,omitempty" maxLength:"200" example:"team-billing" doc:"Who to call when it fails"`
	Description string `json:"description,omitempty" maxLength:"4000"`

	Trigger           *JobTrigger     `json:"trigger,omitempty" doc:"When the job fires. Give this or triggers, not both"`
	Triggers          []JobTrigger    `json:"triggers,omitempty" maxItems:"16" doc:"Several triggers (cron or interval, each in its own timezone), instead of trigger: the job fires at every tick of each; ticks of two triggers at one instant make one run, which records the first of them (trigger_index). An interval in a list ticks every interval_seconds from active_from (from the Unix epoch without one). A list of one is stored as trigger"`
	Executor          JobExecutor     `json:"executor" doc:"What a run does"`
	Target            *JobTarget      `json:"target,omitempty" doc:"Which agents may run it"`
	Route             *JobRoute       `json:"route,omitempty" doc:"How a task picks its agent"`
	Shards            *JobShards      `json:"shards,omitempty" doc:"How a run splits into tasks"`
	Priority          int             `json:"priority,omitempty" minimum:"-1000" maximum:"1000" doc:"Higher leases first"`
	TimeoutSeconds    int             `json:"timeout_seconds,omitempty" minimum:"1" maximum:"604800" doc:"Limit on one attempt of one task; default 3600. At most 900 (the default) for an HTTP job ax sends itself (no target labels): longer work answers 202 and posts its result, or runs on an agent"`
	TimeoutMode       string          `json:"timeout_mode,omitempty" enum:"fixed,adaptive" default:"fixed" doc:"fixed: every attempt gets timeout_seconds. adaptive: a task gets 3 × the P95 duration of the job's recent successful attempts (the last 100, none older than 24 h), at least 5 s, with timeout_seconds as the ceiling and the start value while there is no history; a retry after a timeout gets twice the timeout of the attempt before it, up to the ceiling. adaptive_timeout shows the current value"`
	Retry             *JobRetry       `json:"retry,omitempty" doc:"Retries of a failed task"`
	History           *JobHistory     `json:"history,omitempty" doc:"How long the job's ended runs are kept (default: the server's retention, 7 days for succeeded and cancelled runs and 30 days for failed and timed-out ones unless ax serve was told otherwise; GET /v1/history shows it)"`
	ConcurrencyPolicy string          `json:"concurrency_policy,omitempty" enum:"allow,forbid,replace,queue" default:"allow" doc:"What a fire does while the previous run is unfinished: allow it, forbid (skip and record), replace (cancel the running one), or queue (wait and start when it ends; at most one waits, later fires are skipped as overlap_queue_full)"`
	Concurrency       *JobConcurrency `json:"concurrency,omitempty" doc:"At most limit of the job's tasks with the same key run at once, across all agents and replicas (absent: no such limit)"`
	Misfire           *JobMisfire     `json:"misfire,omitempty" doc:"What happens to fires that were missed"`
	ActiveFrom        *time.Time      `json:"active_from,omitempty" doc:"Start of the active window: no tick before it fires (the first is the trigger's first tick at or after it; an interval starts at it). Absent: open"`
	ActiveUntil       *time.Time      `json:"active_until,omitempty" doc:"End of the active window, exclusive: no tick at or after it fires, and the job has no next fire then. Must be after active_from. Absent: open"`
	JitterSeconds     int             `json:"jitter_seconds,omitempty" minimum:"0" maximum:"86400" doc:"Spread each scheduled run's start by a deterministic offset in [0, jitter_seconds) computed from the job id and the tick (the same on every replica): the run keeps its tick as scheduled_for, its tasks become leasable at the tick plus the offset. 0: none"`
	Exclude           []string        `json:"exclude,omitempty" maxItems:"16" example:"[\"cn-holidays\"]" doc:"Calendars (see /v1/calendars) whose dates the job's ticks skip: a tick whose date, in the calendar's timezone, is listed is recorded as skipped (reason calendar) instead of fired. Read at fire time: editing a calendar changes every job naming it from its next tick"`
	RateLimitClass    string          `json:"rate_limit_class,omitempty" maxLength:"100" pattern:"^[A-Za-z0-9_.-]*$" doc:"Token bucket class that caps this job's lease rate (see /v1/classes)"`
	DegradeAction     string          `json:"degrade_action,omitempty" enum:"wait,skip" default:"wait" doc:"While the class's priority floor is above this job's priority: wait, or skip the run (recorded as cancelled with the reason)"`
	Callback          *JobCallback    `json:"callback,omitempty" doc:"Where to announce results"`
	Params            Params          `json:"params,omitempty" doc:"Parameters handed to every run: a JSON object of at most 256 KiB, nesting at most 64 levels, kept exactly (numbers are never rounded)"`
	SigningSecret     string          `json:"signing_secret,omitempty" readOnly:"true" doc:"The whsec_ secret that signs the job's callbacks and HTTP requests (Standard Webhooks); shown only when the job is created (rotate it to see a new one)"`

	Paused           bool                `json:"paused" readOnly:"true" doc:"Paused jobs do not fire; see pause and resume"`
	PausedAt         *time.Time          `json:"paused_at,omitempty" readOnly:"true"`
	NextFireAt       *time.Time          `json:"next_fire_at,omitempty" readOnly:"true" doc:"When it fires next (UTC); absent when it will not fire on its own"`
	LastFireAt       *time.Time          `json:"last_fire_at,omitempty" readOnly:"true" doc:"When it last fired"`
	LastScheduledFor *time.Time          `json:"last_scheduled_for,omitempty" readOnly:"true" doc:"Scheduled time of the last fire"`
	LastExecutionID  string              `json:"last_execution_id,omitempty" readOnly:"true" format:"uuid" doc:"The last fire's execution"`
	LastState        string              `json:"last_state,omitempty" readOnly:"true" doc:"State of the last fire's execution"`
	SetAsideAt       *time.Time          `json:"set_aside_at,omitempty" readOnly:"true" doc:"When the scheduler stopped firing the job because a fire of it failed (see set_aside_reason); updating the job clears it"`
	SetAsideReason   string              `json:"set_aside_reason,omitempty" readOnly:"true" doc:"Why the job was set aside: the error its last fire met"`
	AdaptiveTimeout  *JobAdaptiveTimeout `json:"adaptive_timeout,omitempty" readOnly:"true" doc:"With timeout_mode adaptive: the timeout a new task gets now, and how it was computed"`
	PausedReason     string              `json:"paused_reason,omitempty" readOnly:"true" doc:"Why ax paused the job: it was left out of its declaration set (absent when paused through the API); declaring it again resumes it"`
	ManagedBy        string              `json:"managed_by,omitempty" readOnly:"true" example:"sdk:billing-agent" doc:"The declaration set that manages the job (POST /v1/declarations: an agent program's jobs, or a file given to ax apply); absent when it is managed through the API. PUT, PATCH and DELETE of a managed job are refused (409) unless ?force=true"`
	DeclaredVersion  string              `json:"declared_version,omitempty" readOnly:"true" doc:"Version of the declaration that last changed the job"`
	DeclaredIn       string              `json:"declared_in,omitempty" readOnly:"true" doc:"Where the declaration that last changed the job came from (a file, a program on a host)"`
	CreatedAt        time.Time           `json:"created_at" readOnly:"true"`
	UpdatedAt        time.Time           `json:"updated_at" readOnly:"true"`
}

// JobTrigger says when a job fires.
type JobTrigger struct {
	Kind            string        `json:"kind" enum:"cron,interval,delay,manual,after" doc:"cron: on a cron expression in a timezone; interval: every interval_seconds from the previous scheduled time; delay: once at run_at; manual: only when triggered through the API; after: once per logical time of the upstream jobs' runs (see upstream and mode)"`
	Cron            string        `json:"cron,omitempty" maxLength:"200" example:"0 0 8 * * ?" doc:"Cron expression (kind cron): 5 fields (minute first) or 6 (seconds first); Sunday is 0 or 7; see the README for the dialect"`
	Timezone        string        `json:"timezone,omitempty" maxLength:"100" default:"UTC" example:"Asia/Shanghai" doc:"IANA timezone the cron expression is read in"`
	IntervalSeconds int64         `json:"interval_seconds,omitempty" minimum:"1" maximum:"31536000" doc:"Seconds between fires (kind interval)"`
	RunAt           *time.Time    `json:"run_at,omitempty" doc:"When to fire (kind delay); must be in the future"`
	Upstream        []JobUpstream `json:"upstream,omitempty" maxItems:"50" doc:"The jobs this one runs after (kind after). It fires once per logical time of their runs (their scheduled_for), with that scheduled_for, so a day's runs never mix with another's. No cycles"`
	Mode            string        `json:"mode,omitempty" enum:"all,any" doc:"When to fire (kind after): all: once every upstream's run for the logical time ended as its on asks (an upstream that ended otherwise records the time as skipped, reason upstream_failed); any: once the first did. Default all"`
}

// JobUpstream is one job a job of trigger kind after runs after.
type JobUpstream struct {
	Job string `json:"job" minLength:"3" maxLength:"401" pattern:"^[^/]+/.+$" example:"etl/extract-orders" doc:"The upstream job, as group/name"`
	On  string `json:"on,omitempty" enum:"success,failure,completion" default:"success" doc:"The end its run must reach: success (succeeded), failure (failed or timed out) or completion (any end)"`
}

// JobExecutor says what a run does.
type JobExecutor struct {
	Kind    string            `json:"kind" enum:"shell,http,handler" doc:"shell: run command on an agent; http: call url; handler: a Go handler registered in an agent by name"`
	Command string            `json:"command,omitempty" maxLength:"65536" example:"./report.sh --day yesterday" doc:"Shell command (kind shell), run with /bin/sh -c"`
	URL     string            `json:"url,omitempty" maxLength:"2048" example:"https://billing.internal/run" doc:"Absolute http(s) URL (kind http). Query values are write-only: shown as ax-redacted, which sent back keeps the stored value"`
	Method  string            `json:"method,omitempty" enum:"GET,POST,PUT,PATCH,DELETE" default:"POST" doc:"HTTP method (kind http)"`
	Headers map[string]string `json:"headers,omitempty" doc:"Extra request headers (kind http). Values are write-only: shown as ax-redacted, which sent back keeps the stored value"`
	Body    string            `json:"body,omitempty" maxLength:"65536" doc:"Request body template (kind http): the route key's subset of Go text/template, plus json of a field ({{json .params}}); renders to at most 2 MiB"`
	Handler string            `json:"handler,omitempty" maxLength:"200" pattern:"^[A-Za-z0-9_.:/-]*$" example:"reports.nightly" doc:"Handler name (kind handler)"`
}

// JobTarget selects agents by label.
type JobTarget struct {
	Labels map[string]string `json:"labels,omitempty" maxProperties:"100" example:"{\"pool\":\"billing\"}" doc:"Only agents carrying all these labels may run the job: at most 100, keys of 1-100 of A-Z a-z 0-9 _ . - /, values of at most 255 bytes"`
}

// JobConcurrency limits how many of a job's tasks with the same key run
// at once.
type JobConcurrency struct {
	Key   string `json:"key" minLength:"1" maxLength:"1000" example:"customer={{.params.customer}}" doc:"Concurrency key: the route key's template (over .params, .shard and .job, the same subset), rendered once per task when its run is made and stored on the task; at most 256 bytes rendered. A task whose key does not render (a missing param) or renders empty or longer fails at once with error code concurrency_key_invalid"`
	Limit int    `json:"limit" minimum:"1" maximum:"10000" example:"2" doc:"At most this many tasks with the same key value are leased or running at once; the others wait (ax.tasks_without_agent says why) and keys take turns"`
	Group string `json:"group,omitempty" maxLength:"100" pattern:"^[A-Za-z0-9_.-]*$" example:"exports" doc:"Share the keys' limits with every job of the same job group and concurrency group: tasks of such jobs with the same key value count together (each task held to its own job's limit); jobs of other job groups naming the same concurrency group count apart. Absent: the job's keys are its own"`
}

// JobRoute picks the agent for each task.
type JobRoute struct {
	Strategy string `json:"strategy,omitempty" enum:"round_robin,random,weighted,least_active,consistent_hash,load_aware,broadcast,failover" default:"round_robin"`
	Key      string `json:"key,omitempty" maxLength:"1000" example:"customer_id={{.params.customer_id}}" doc:"Route key for consistent_hash and load_aware: a Go text/template over .params (the run's params), .shard (.index, .total, .param) and .job (.id, .name, .group); fields, if/with/else, and, or, not, eq, ne, lt, le, gt, ge, len, index and slice only (no range, variables or printf); renders to at most 4 KiB"`
}

// JobShards splits a run into tasks.
type JobShards struct {
	Count     int                `json:"count,omitempty" minimum:"1" maximum:"10000" default:"1" doc:"Number of tasks per run. A change applies to runs fired after it: an unfinished run keeps the count (and params) it fired with"`
	Params    []string           `json:"params,omitempty" maxItems:"10000" doc:"One parameter per shard; when empty each shard gets its part of range as \"from-to\", or what generator makes"`
	Range     *ShardRange        `json:"range,omitempty" doc:"Range split among shards that have no param; defaults to the 32-bit hash space [0, 4294967296); absent with a generator"`
	Generator *JobShardGenerator `json:"generator,omitempty" doc:"Makes each run's shard params from the fire instead of params or range (see POST /v1/jobs/{id}/shards/preview)"`
}

// JobShardGenerator makes each shard's param from the fire: a JSON object
// as a string, in shard_param.
type JobShardGenerator struct {
	Kind          string `json:"kind" enum:"time_window,mod" doc:"time_window: shard i of count gets the i-th of count equal windows of window_seconds ending at the run's scheduled time, as {\"from\":\"…\",\"to\":\"…\"} (RFC 3339 with the job's local offset, from included, to excluded); a window of whole days is split in local wall-clock time (a day across a DST change is 23 or 25 hours: the skipped hour's window is empty, the repeated hour's holds both passes), any other window in equal absolute spans. mod: shard i of count gets {\"modulus\":count,\"residue\":i}, to take the ids with id % modulus = residue"`
	WindowSeconds int    `json:"window_seconds,omitempty" minimum:"1" maximum:"31622400" example:"86400" doc:"Span the windows split (kind time_window, required): at most 366 days, a multiple of shards.count"`
}

// ShardRange is a half-open integer range [from, to) that shards split
// evenly when the job gives no per-shard params.
type ShardRange struct {
	From int64 `json:"from" example:"0" doc:"First value of the range"`
	To   int64 `json:"to" example:"1000000" doc:"End of the range (excluded)"`
}

// JobRetry says how failed tasks are retried. Left out, a task gets 3
// retries, 5, 10 and 20 s apart (35 s of waiting in all). A lease lost
// with its agent is not a failure and uses up no attempt.
type JobRetry struct {
	MaxAttempts       int `json:"max_attempts,omitempty" minimum:"1" maximum:"100" default:"4" doc:"Attempts per task, the first included (1: never retried). A run again after a lease lost with its agent uses up none"`
	BackoffSeconds    int `json:"backoff_seconds,omitempty" minimum:"1" maximum:"86400" default:"5" doc:"Wait before the first retry; doubles each retry"`
	BackoffMaxSeconds int `json:"backoff_max_seconds,omitempty" minimum:"1" maximum:"86400" default:"600" doc:"Longest wait between retries"`
}

// JobHistory overrides the server's retention for one job. A run is
// removed when its retention has passed since it ended, within one
// history partition's width (a day by default); a run that has not ended
// is never removed.
type JobHistory struct {
	RetentionSeconds       int `json:"retention_seconds,omitempty" minimum:"1" maximum:"34560000" example:"86400" doc:"Keep succeeded and cancelled runs this long after they end, instead of the server's retention (at most 400 days)"`
	FailedRetentionSeconds int `json:"failed_retention_seconds,omitempty" minimum:"1" maximum:"34560000" example:"2592000" doc:"Keep failed and timed-out runs this long after they end, instead of the server's failed retention (at most 400 days)"`
}

// JobMisfire says what happens to fires missed while no replica ran or the
// job was paused.
type JobMisfire struct {
	Policy        string `json:"policy,omitempty" enum:"fire_once,skip,fire_all" default:"fire_once" doc:"fire_once: one catch-up run; skip: record the missed fires as skipped; fire_all: run each missed fire, up to max_fires"`
	WindowSeconds int    `json:"window_seconds,omitempty" minimum:"1" maximum:"31536000" default:"86400" doc:"Missed fires older than this are skipped whatever the policy"`
	MaxFires      int    `json:"max_fires,omitempty" minimum:"1" maximum:"10000" default:"100" doc:"Cap on catch-up runs under fire_all; times the shards a run, at most 50,000 (a catch-up is written at once)"`
}

// JobCallback says where results are announced.
type JobCallback struct {
	URL string `json:"url" maxLength:"2048" format:"uri" example:"https://example.com/ax-callback" doc:"Absolute http(s) URL that receives a signed POST when a run ends. Query values are write-only: shown as ax-redacted, which sent back keeps the stored value"`
	// Ordered is opt-in: without it each callback is delivered (and
	// retried) on its own.
	Ordered bool `json:"ordered,omitempty" doc:"Deliver the job's callbacks in sequence order: a callback is not sent until the one before it (its sequence minus one) is delivered or has failed for good. Every callback carries its sequence, gap-free per job, in the body and the Ax-Callback-Sequence header"`
}

// JobAdaptiveTimeout is the current timeout of an adaptive job and how it
// was computed. A fire measures the job's history again when the last
// measure is older than a minute.
type JobAdaptiveTimeout struct {
	TimeoutSeconds int        `json:"timeout_seconds" doc:"What the first attempt of a new task gets"`
	Basis          string     `json:"basis" enum:"no_history,p95,floor,ceiling" doc:"What decided it: no_history (no measured success: timeout_seconds, the start value), p95 (3 × P95, rounded up to whole seconds), floor (3 × P95 was under 5 s), ceiling (3 × P95 was over timeout_seconds)"`
	Samples        int        `json:"samples" doc:"Successful attempts measured: the latest, at most 100, none older than 24 h"`
	P95Seconds     *float64   `json:"p95_seconds,omitempty" doc:"Their 95th percentile duration (nearest rank), from lease to result; absent without samples"`
	MeasuredAt     *time.Time `json:"measured_at,omitempty" doc:"When the history was measured; absent before the first fire as an adaptive job"`
	Explanation    string     `json:"explanation" example:"3 × P95 of 40 successful attempts (3 × 3.9 s = 11.7 s), rounded up: 12 s" doc:"The computation in words"`
}
