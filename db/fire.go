package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// DueTrigger is a claimed trigger row with what planning its fires needs.
type DueTrigger struct {
	JobID                uuid.UUID
	TriggerKind          string
	CronExpr             string
	Timezone             string
	IntervalSeconds      int64
	ConcurrencyPolicy    string
	MisfirePolicy        string
	MisfireWindowSeconds int
	MisfireMaxFires      int
	NextFireAt           time.Time
	// Now is the database clock the claim ran at (the transaction's start).
	Now time.Time
	// HasUnfinished is set (for forbid and replace jobs only) when an
	// earlier execution has not ended.
	HasUnfinished bool
}

// TriggerClaimDue locks up to max triggers due within `ahead` from now
// until the transaction ends; rows locked by other replicas are skipped.
// now, when set, replaces the database clock (tests and benchmarks).
func TriggerClaimDue(ctx context.Context, e Executor, max int, ahead time.Duration, now *time.Time) ([]*DueTrigger, error) {
	rows, err := queries.TriggerClaimDue(ctx, e, dbsqlc.TriggerClaimDueParams{
		Now: now, Max: int32(max), AheadMs: ahead.Milliseconds(),
	})
	if err != nil {
		return nil, fmt.Errorf("error claiming due triggers: %w", mapErr(err))
	}
	out := make([]*DueTrigger, len(rows))
	for i, r := range rows {
		out[i] = &DueTrigger{
			JobID: r.ID, TriggerKind: string(r.TriggerKind), CronExpr: deref(r.CronExpr), Timezone: r.Timezone,
			IntervalSeconds: deref(r.IntervalSeconds), ConcurrencyPolicy: string(r.ConcurrencyPolicy),
			MisfirePolicy: string(r.MisfirePolicy), MisfireWindowSeconds: int(r.MisfireWindowSeconds),
			MisfireMaxFires: int(r.MisfireMaxFires), NextFireAt: r.NextFireAt.UTC(), Now: r.DbNow.UTC(), HasUnfinished: r.HasUnfinished,
		}
	}
	return out, nil
}

// Execution causes.
const (
	CauseSchedule = "schedule" // an on-time tick
	CauseCatchUp  = "catch_up" // a missed tick fired late under the misfire policy
	CauseManual   = "manual"   // the trigger API
)

// NewExecution is a fire to record. Params nil means the job's params.
type NewExecution struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	Cause        string
	ScheduledFor time.Time
	Misfired     bool
	Params       json.RawMessage
	Priority     *int // nil: the job's priority
	// TraceParent is the caller's W3C trace context; "" makes one whose
	// trace id is the execution id.
	TraceParent string
}

// InsertedExecution is a fire that was recorded.
type InsertedExecution struct {
	ID           uuid.UUID
	JobID        uuid.UUID
	ScheduledFor time.Time
	FiredAt      time.Time
}

// ExecutionInsertMany records fires and makes their tasks (one per shard,
// or for broadcast jobs one per agent live within p.Live), in two
// set-based statements. A scheduled tick that has an execution already is
// left out, so a tick fires once whatever races. The new tasks come back
// for routing.
func ExecutionInsertMany(ctx context.Context, e Executor, execs []*NewExecution, live time.Duration) ([]InsertedExecution, []*NewTask, error) {
	if len(execs) == 0 {
		return nil, nil, nil
	}
	p := dbsqlc.ExecutionInsertManyParams{}
	for _, x := range execs {
		p.Ids = append(p.Ids, x.ID)
		p.JobIds = append(p.JobIds, x.JobID)
		p.Causes = append(p.Causes, x.Cause)
		p.ScheduledFors = append(p.ScheduledFors, x.ScheduledFor)
		p.Misfired = append(p.Misfired, x.Misfired)
		p.Params = append(p.Params, []byte(x.Params))
		p.Priorities = append(p.Priorities, int32(deref(x.Priority)))
		p.PrioritySet = append(p.PrioritySet, x.Priority != nil)
		p.Traceparents = append(p.Traceparents, x.TraceParent)
	}
	rows, err := queries.ExecutionInsertMany(ctx, e, p)
	if err != nil {
		return nil, nil, fmt.Errorf("error inserting executions: %w", mapErr(err))
	}
	out := make([]InsertedExecution, len(rows))
	ids := make([]uuid.UUID, len(rows))
	for i, r := range rows {
		out[i] = InsertedExecution{ID: r.ID, JobID: r.JobID, ScheduledFor: r.ScheduledFor.UTC(), FiredAt: r.FiredAt.UTC()}
		ids[i] = r.ID
	}
	if len(ids) == 0 {
		return out, nil, nil
	}
	taskRows, err := queries.TaskInsertForExecutions(ctx, e, dbsqlc.TaskInsertForExecutionsParams{
		ExecutionIds: ids, LiveSeconds: live.Seconds()})
	if err != nil {
		return nil, nil, fmt.Errorf("error inserting tasks: %w", mapErr(err))
	}
	tasks := make([]*NewTask, len(taskRows))
	for i, r := range taskRows {
		tasks[i] = &NewTask{ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, JobName: r.JobName,
			JobGroup: r.GroupName, ShardIndex: int(r.ShardIndex), ShardTotal: int(r.ShardTotal),
			ShardParam: r.ShardParam, Pinned: r.Pinned, Agentless: r.Agentless, RouteStrategy: string(r.RouteStrategy), ExecutorKind: r.ExecutorKind,
			RouteKey: r.RouteKey, Params: r.Params}
		if err := json.Unmarshal(r.TargetLabels, &tasks[i].TargetLabels); err != nil {
			return nil, nil, fmt.Errorf("error decoding target labels of job %s: %w", r.JobID, err)
		}
	}
	return out, tasks, nil
}

// NewTask is a task just made, with what routing needs to place it.
type NewTask struct {
	ID, ExecutionID, JobID uuid.UUID
	JobName, JobGroup      string
	ShardIndex, ShardTotal int
	ShardParam             string
	Pinned                 bool // a broadcast task, made for one agent
	Agentless              bool // an HTTP task ax serve sends itself; agents never lease it
	RouteStrategy          string
	ExecutorKind           string // shell, http or handler: only agents accepting it are routed to
	RouteKey               string // the job's template
	TargetLabels           map[string]string
	Params                 json.RawMessage
}

// TaskRoute is one routing decision; nil agent ids mean no preference.
type TaskRoute struct {
	TaskID              uuid.UUID
	Preferred, Fallback uuid.UUID
	RouteKey            string
}

// TaskSetRoute records routing decisions.
func TaskSetRoute(ctx context.Context, e Executor, routes []TaskRoute) error {
	if len(routes) == 0 {
		return nil
	}
	p := dbsqlc.TaskSetRouteParams{}
	for _, r := range routes {
		p.TaskIds = append(p.TaskIds, r.TaskID)
		p.Preferred = append(p.Preferred, r.Preferred)
		p.Fallback = append(p.Fallback, r.Fallback)
		p.RouteKeys = append(p.RouteKeys, r.RouteKey)
	}
	if err := queries.TaskSetRoute(ctx, e, p); err != nil {
		return fmt.Errorf("error recording task routes: %w", mapErr(err))
	}
	return nil
}

// Skip reasons.
const (
	SkipMisfire = "misfire"
	SkipOverlap = "overlap"
	SkipPaused  = "paused"
	SkipDSTGap  = "dst_gap"
)

// SkippedFire is a run of ticks of one job that did not fire.
type SkippedFire struct {
	JobID      uuid.UUID
	Reason     string
	FirstTick  time.Time
	LastTick   time.Time
	TickCount  int // 0: not counted (too many)
	Detail     string
	RecordedAt time.Time
}

// SkippedFireInsertMany records skipped ticks.
func SkippedFireInsertMany(ctx context.Context, e Executor, skips []*SkippedFire) error {
	if len(skips) == 0 {
		return nil
	}
	p := dbsqlc.SkippedFireInsertManyParams{}
	for _, s := range skips {
		p.JobIds = append(p.JobIds, s.JobID)
		p.Reasons = append(p.Reasons, s.Reason)
		p.FirstTicks = append(p.FirstTicks, s.FirstTick)
		p.LastTicks = append(p.LastTicks, s.LastTick)
		p.TickCounts = append(p.TickCounts, int32(s.TickCount))
		p.Details = append(p.Details, s.Detail)
	}
	if err := queries.SkippedFireInsertMany(ctx, e, p); err != nil {
		return fmt.Errorf("error recording skipped fires: %w", mapErr(err))
	}
	return nil
}

// SkippedFireListByJob returns the newest skipped ticks of a job.
func SkippedFireListByJob(ctx context.Context, e Executor, jobID uuid.UUID, limit int) ([]*SkippedFire, error) {
	rows, err := queries.SkippedFireListByJob(ctx, e, dbsqlc.SkippedFireListByJobParams{JobID: jobID, Max: int32(limit)})
	if err != nil {
		return nil, fmt.Errorf("error listing skipped fires: %w", mapErr(err))
	}
	out := make([]*SkippedFire, len(rows))
	for i, r := range rows {
		out[i] = &SkippedFire{JobID: r.JobID, Reason: string(r.Reason), FirstTick: r.FirstTick.UTC(),
			LastTick: r.LastTick.UTC(), TickCount: int(deref(r.TickCount)), Detail: r.Detail, RecordedAt: r.RecordedAt.UTC()}
	}
	return out, nil
}

// TriggerAdvance is where one claimed trigger goes after a batch.
type TriggerAdvance struct {
	JobID      uuid.UUID
	NextFireAt *time.Time // nil: no further fire (delay done, cron exhausted)
	// LastExecutionID and LastScheduledFor are set when the batch fired it.
	LastExecutionID  uuid.UUID
	LastScheduledFor time.Time
}

// TriggerAdvanceMany moves claimed triggers to their next ticks.
func TriggerAdvanceMany(ctx context.Context, e Executor, advances []*TriggerAdvance) error {
	if len(advances) == 0 {
		return nil
	}
	p := dbsqlc.TriggerAdvanceManyParams{}
	for _, a := range advances {
		fired := a.LastExecutionID != uuid.Nil
		p.JobIds = append(p.JobIds, a.JobID)
		p.HasNext = append(p.HasNext, a.NextFireAt != nil)
		p.NextFireAts = append(p.NextFireAts, deref(a.NextFireAt))
		p.Fired = append(p.Fired, fired)
		p.LastScheduledFors = append(p.LastScheduledFors, a.LastScheduledFor)
		p.LastExecutionIds = append(p.LastExecutionIds, a.LastExecutionID)
	}
	if err := queries.TriggerAdvanceMany(ctx, e, p); err != nil {
		return fmt.Errorf("error advancing triggers: %w", mapErr(err))
	}
	return nil
}

// TriggerNextDue returns how long until the earliest unpaused fire by the
// database clock (negative when one is due); ok is false when nothing is
// scheduled at all.
func TriggerNextDue(ctx context.Context, e Executor) (wait time.Duration, ok bool, err error) {
	r, err := queries.TriggerNextDue(ctx, e)
	if err != nil {
		return 0, false, fmt.Errorf("error finding next due trigger: %w", mapErr(err))
	}
	return time.Duration(r.Micros) * time.Microsecond, r.Scheduled, nil
}
