package openapi

import (
	"encoding/json"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
)

// Execution is one fire of a job: the status the trigger API points to.
type Execution struct {
	ID                string          `json:"id" format:"uuid" doc:"Execution id: the callback's webhook-id, and each task's idempotency key (followed by :<shard index> when the run has several shards)"`
	JobID             string          `json:"job_id" format:"uuid"`
	Cause             string          `json:"cause" enum:"schedule,catch_up,manual,delayed,rerun,backfill,after" doc:"schedule: an on-time tick; catch_up: a missed tick fired late; manual: the trigger API; delayed: a run asked for later (run_at or delay_seconds); rerun: a re-run of an earlier run (rerun_of); backfill: a past tick filled in by a backfill (backfill_id); after: its upstream jobs' runs for its logical time ended (caused_by)"`
	State             string          `json:"state" enum:"scheduled,pending,running,succeeded,failed,timed_out,cancelled" doc:"scheduled: a delayed run waiting for its time (it has no tasks yet); cancelled before it fired, it shows cancelled without fired_at"`
	ScheduledFor      time.Time       `json:"scheduled_for" doc:"The tick this execution serves (for manual runs, when the trigger was accepted; for delayed runs, their run_at)"`
	FiredAt           *time.Time      `json:"fired_at,omitempty" doc:"When it was created; fired_at - scheduled_for is the fire lag. Absent while a delayed run is scheduled"`
	Held              bool            `json:"held,omitempty" doc:"A delayed run that came due while its job was paused: it fires when the job resumes, under the job's misfire policy"`
	Misfired          bool            `json:"misfired" doc:"The tick was missed and fired late under the misfire policy"`
	Params            Params          `json:"params" doc:"The run's params, exactly as given"`
	ShardCount        int             `json:"shard_count"`
	Priority          int             `json:"priority"`
	StartedAt         *time.Time      `json:"started_at,omitempty"`
	FinishedAt        *time.Time      `json:"finished_at,omitempty"`
	CancelRequestedAt *time.Time      `json:"cancel_requested_at,omitempty"`
	CancelReason      string          `json:"cancel_reason,omitempty"`
	Error             string          `json:"error,omitempty" doc:"Why the run ended without tasks (e.g. a broadcast found no live agent)"`
	TraceParent       string          `json:"traceparent,omitempty" doc:"W3C trace context of the run: the caller's, else one whose trace id is the execution id; agents and callbacks get it"`
	TriggerIndex      *int            `json:"trigger_index,omitempty" doc:"Which of the job's triggers fired a scheduled run (cause schedule or catch_up): its index in the job's triggers, 0 for a job with one trigger. When several tick at that instant the run is one, and this is the first of them. Absent for runs no trigger fired"`
	StatusURL         string          `json:"status_url" doc:"Where to ask for its state: GET it, with ?wait=30s to wait for the end"`
	Callback          *Callback       `json:"callback,omitempty" doc:"Delivery of its result to the job's callback URL (shown when getting one execution)"`
	Tasks             []Task          `json:"tasks,omitempty" doc:"One per shard (shown when getting one execution)"`
	RerunOf           string          `json:"rerun_of,omitempty" format:"uuid" doc:"The run this one re-runs (cause rerun)"`
	Reruns            []string        `json:"reruns,omitempty" doc:"Runs that re-run this one, oldest first (shown when getting one execution)"`
	BackfillID        string          `json:"backfill_id,omitempty" format:"uuid" doc:"The backfill that made this run (shown when getting one execution)"`
	CausedBy          []CausingRun    `json:"caused_by,omitempty" doc:"The upstream runs whose ends fired this run (a job of trigger kind after; shown when getting one execution)"`
	Queue             *ExecutionQueue `json:"queue,omitempty" doc:"Concurrency policy queue: the run came while another run of its job was unfinished and waited (or waits) behind it (shown when getting one execution)"`
	ErrorCodes        map[string]int  `json:"error_codes,omitempty" doc:"How many shards ended without succeeding, by error code; shards without a code are not counted (shown when getting one execution)" example:"{\"exit_3\": 2, \"signal_killed\": 1}"`
}

// ExecutionQueue is how a run of a queue job waited behind an unfinished
// run of its job.
type ExecutionQueue struct {
	Waiting    bool       `json:"waiting" doc:"It waits still: its tasks are held (not_before far ahead) until the run behind ends, then it starts at once"`
	Behind     string     `json:"behind,omitempty" format:"uuid" doc:"The run it waits or waited behind (absent when that run had ended before the wait was recorded)"`
	QueuedAt   time.Time  `json:"queued_at" doc:"When it began to wait"`
	ReleasedAt *time.Time `json:"released_at,omitempty" doc:"When the run behind ended and this one was let go"`
}

// CausingRun is an upstream run that fired a run of a job of trigger kind after.
type CausingRun struct {
	ExecutionID  string     `json:"execution_id" format:"uuid"`
	JobID        string     `json:"job_id" format:"uuid"`
	Job          string     `json:"job" doc:"The upstream job, as group/name"`
	State        string     `json:"state" doc:"How the upstream run ended"`
	ScheduledFor time.Time  `json:"scheduled_for" doc:"Its logical time, which the caused run shares"`
	FinishedAt   *time.Time `json:"finished_at,omitempty"`
}

// Task is one shard of an execution.
type Task struct {
	ID             string          `json:"id" format:"uuid"`
	ShardIndex     int             `json:"shard_index"`
	ShardTotal     int             `json:"shard_total"`
	ShardParam     string          `json:"shard_param,omitempty"`
	IdempotencyKey string          `json:"idempotency_key" doc:"The task's key, the same on every attempt: the execution id, or <execution id>:<shard index> when the run has several shards. A Go handler gets it from Task.IdempotencyKey, a shell command as AX_IDEMPOTENCY_KEY, an HTTP target as Idempotency-Key and webhook-id, and the callback lists it per shard"`
	State          string          `json:"state" enum:"pending,leased,running,succeeded,failed,timed_out,cancelled"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	LostLeases     int             `json:"lost_leases" doc:"Leases lost with their agent (offline or silent): each ran the task again without using up an attempt; at the server's cap (3 by default) the task fails with an error starting \"lost:\""`
	TimeoutSeconds int             `json:"timeout_seconds" doc:"Limit on the current attempt (with timeout_mode adaptive: from the job's history, doubled after a timeout)"`
	NotBefore      time.Time       `json:"not_before" doc:"Not leased before this time (retry backoff; far ahead, year 9999, while its run waits behind another under concurrency policy queue)"`
	AgentID        string          `json:"agent_id,omitempty" format:"uuid" doc:"The agent that holds, or last held, the task's lease (absent: never leased, or an HTTP task ax sends itself)"`
	LeasedAt       *time.Time      `json:"leased_at,omitempty" doc:"When the latest attempt was leased (to agent_id)"`
	StartedAt      *time.Time      `json:"started_at,omitempty" doc:"When the agent first reported the latest attempt running (its first heartbeat); absent when the attempt ended before one, as short tasks do, whose start is then leased_at"`
	FinishedAt     *time.Time      `json:"finished_at,omitempty"`
	Result         json.RawMessage `json:"result,omitempty" doc:"What the task reported"`
	Error          string          `json:"error,omitempty"`
	ResultOmitted  bool            `json:"result_omitted,omitempty" doc:"The task has a result or error this answer leaves out: one answer gives at most 1,000 tasks' results and errors, as many as 8 MiB hold by their stored size (see the submitting-work guide); ask again with shards_from"`
	ErrorCode      string          `json:"error_code,omitempty" example:"exit_3" doc:"Machine-readable reason of the last attempt's failure: exit_<n>, signal_<name> (shell), http_<status>, connect, timeout (HTTP), lease_expired, lost (its lease lost too often, its agent offline or silent), concurrency_key_invalid (its key did not render), agent_offline (a broadcast task whose agent went offline before leasing it), or what a handler or target reported"`
}

// SkippedFire is a run of ticks that did not fire, with why.
type SkippedFire struct {
	Reason     string    `json:"reason" enum:"misfire,overlap,overlap_queue_full,paused,dst_gap,calendar,upstream_failed,cascade_bound"`
	FirstTick  time.Time `json:"first_tick"`
	LastTick   time.Time `json:"last_tick" doc:"Last skipped tick, or the end of the range when the ticks were too many to count"`
	TickCount  int       `json:"tick_count,omitempty" doc:"How many ticks; absent when too many to count"`
	Detail     string    `json:"detail"`
	RecordedAt time.Time `json:"recorded_at"`
}

func executionFromDB(e *axtype.Execution, tasks []*axtype.Task) (*Execution, error) {
	out := &Execution{
		StatusURL: "/v1/executions/" + e.ID.String(),
		ID:        e.ID.String(), JobID: e.JobID.String(), Cause: string(e.Cause), State: string(e.State),
		ScheduledFor: e.ScheduledFor, FiredAt: &e.FiredAt, Misfired: e.Misfired, Params: Params(e.Params),
		ShardCount: e.ShardCount, Priority: e.Priority, StartedAt: e.StartedAt, FinishedAt: e.FinishedAt,
		CancelRequestedAt: e.CancelRequestedAt, CancelReason: e.CancelReason, Error: e.Error,
		TraceParent: e.TraceParent, TriggerIndex: e.TriggerIndex,
	}
	for _, t := range tasks {
		task := Task{
			ID: t.ID.String(), ShardIndex: t.ShardIndex, ShardTotal: t.ShardTotal, ShardParam: t.ShardParam,
			IdempotencyKey: httptask.IdempotencyKey(e.ID.String(), t.ShardIndex, t.ShardTotal),
			State:          string(t.State), Attempt: t.Attempt, MaxAttempts: t.MaxAttempts, LostLeases: t.LostLeases,
			TimeoutSeconds: t.TimeoutSeconds, NotBefore: t.NotBefore, LeasedAt: t.LeasedAt,
			StartedAt: t.StartedAt, FinishedAt: t.FinishedAt, Result: t.Result, Error: t.Error, ErrorCode: t.ErrorCode,
			ResultOmitted: t.ResultOmitted,
		}
		if t.AgentID != nil {
			task.AgentID = t.AgentID.String()
		}
		out.Tasks = append(out.Tasks, task)
		if t.ErrorCode != "" && t.State.Ended() && t.State != axtype.TaskSucceeded {
			if out.ErrorCodes == nil {
				out.ErrorCodes = map[string]int{}
			}
			out.ErrorCodes[t.ErrorCode]++
		}
	}
	return out, nil
}

// executionFromScheduled shows a delayed run that has not fired as the
// execution it will be: state scheduled (or cancelled), no tasks. Params
// are the run's own, which overlay the job's when it fires.
func executionFromScheduled(r *axtype.DelayedRun) *Execution {
	out := &Execution{StatusURL: "/v1/executions/" + r.ID.String(), ID: r.ID.String(), JobID: r.JobID.String(),
		Cause: string(axtype.CauseDelayed), State: "scheduled", ScheduledFor: r.RunAt, Params: Params(r.Params),
		TraceParent: r.TraceParent, Held: r.Held}
	if out.Params == nil {
		out.Params = Params("{}")
	}
	if r.Priority != nil {
		out.Priority = *r.Priority
	}
	if r.CancelledAt != nil {
		out.State, out.CancelRequestedAt, out.FinishedAt, out.CancelReason = string(axtype.ExecutionCancelled),
			r.CancelledAt, r.CancelledAt, r.CancelReason
	}
	return out
}

// TickExplanation says what became of one instant of a job's schedule.
type TickExplanation struct {
	At        time.Time       `json:"at" doc:"The instant explained; for a wall time inside a daylight-saving gap, the end of the gap, where such a tick fires"`
	Local     string          `json:"local" doc:"at on the job's clock, with the offset in effect"`
	Verdict   string          `json:"verdict" enum:"fired,skipped,not_a_tick,dst_gap,paused,not_created,upcoming,manual,no_record,outside_window,excluded,waiting"`
	Reason    string          `json:"reason" doc:"One sentence for a person"`
	Tick      bool            `json:"tick" doc:"at is a tick of the job's trigger"`
	Execution *ExecutionBrief `json:"execution,omitempty" doc:"The run fired for the tick"`
	Running   *ExecutionBrief `json:"running,omitempty" doc:"For an overlap skip: the run that had not finished at that instant; for a run that waited (concurrency policy queue): the run it waited behind"`
	Skip      *SkippedFire    `json:"skip,omitempty" doc:"The skip record that covers the tick"`
	NextTick  *time.Time      `json:"next_tick,omitempty" doc:"The trigger's first tick after at (of a job with several triggers: the first of theirs)"`
	Triggers  []TriggerTick   `json:"triggers,omitempty" doc:"For a job with several triggers: each trigger, whether it ticks at at, and its own next tick"`
}

// TriggerTick is one trigger of a job's list seen from the instant
// explained.
type TriggerTick struct {
	Index    int        `json:"index" doc:"Its index in the job's triggers"`
	Trigger  JobTrigger `json:"trigger"`
	Tick     bool       `json:"tick" doc:"It ticks at the instant"`
	NextTick *time.Time `json:"next_tick,omitempty" doc:"Its first tick after the instant"`
}

// ExecutionBrief names a run.
type ExecutionBrief struct {
	ID           string    `json:"id" format:"uuid"`
	State        string    `json:"state"`
	ScheduledFor time.Time `json:"scheduled_for"`
	TriggerIndex *int      `json:"trigger_index,omitempty" doc:"The trigger that fired it (Execution.trigger_index)"`
}

func executionBrief(e *axtype.Execution) *ExecutionBrief {
	if e == nil {
		return nil
	}
	return &ExecutionBrief{ID: e.ID.String(), State: string(e.State), ScheduledFor: e.ScheduledFor.UTC(), TriggerIndex: e.TriggerIndex}
}
