package db

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// ExecutionGetByID returns one execution.
func ExecutionGetByID(ctx context.Context, e Executor, id uuid.UUID) (*axtype.Execution, error) {
	r, err := queries.ExecutionGetByID(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting execution %s: %w", id, mapErr(err))
	}
	return executionFromRow(r), nil
}

// ExecutionGetByTick returns the run of jobID fired for the tick at,
// live or in history; ErrNotFound when there is none.
func ExecutionGetByTick(ctx context.Context, e Executor, jobID uuid.UUID, at time.Time) (*axtype.Execution, error) {
	r, err := queries.ExecutionGetByTick(ctx, e, dbsqlc.ExecutionGetByTickParams{JobID: jobID, ScheduledFor: at})
	if err != nil {
		return nil, fmt.Errorf("error getting the run of job %s for %s: %w", jobID, at.Format(time.RFC3339), mapErr(err))
	}
	return executionFromRow(r), nil
}

// ExecutionRunningAt returns the newest run of jobID for a tick before
// tick that was not finished at at; ErrNotFound when there is none.
func ExecutionRunningAt(ctx context.Context, e Executor, jobID uuid.UUID, tick, at time.Time) (*axtype.Execution, error) {
	r, err := queries.ExecutionRunningAt(ctx, e, dbsqlc.ExecutionRunningAtParams{JobID: jobID, Tick: tick, At: at})
	if err != nil {
		return nil, fmt.Errorf("error getting the run of job %s in flight at %s: %w", jobID, at.Format(time.RFC3339), mapErr(err))
	}
	return executionFromRow(r), nil
}

// ExecutionListParams filters and pages ExecutionList; nil matches all.
type ExecutionListParams struct {
	JobID  *uuid.UUID
	State  *axtype.ExecutionState
	From   *time.Time // scheduled_for >= From
	To     *time.Time // scheduled_for < To
	Before *uuid.UUID // last id of the previous page
	Groups []string   // only runs of jobs of these groups; nil: all
	Limit  int
}

// ExecutionList returns executions newest first.
func ExecutionList(ctx context.Context, e Executor, p *ExecutionListParams) ([]*axtype.Execution, error) {
	rows, err := queries.ExecutionList(ctx, e, dbsqlc.ExecutionListParams{
		JobID: p.JobID, State: (*string)(p.State), From: p.From, To: p.To, Before: p.Before, Groups: p.Groups, Max: int32(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("error listing executions: %w", mapErr(err))
	}
	out := make([]*axtype.Execution, len(rows))
	for i, r := range rows {
		out[i] = executionFromRow(r)
	}
	return out, nil
}

// ExecutionCancel stops the unfinished executions among ids and of jobIDs.
func ExecutionCancel(ctx context.Context, e Executor, ids, jobIDs []uuid.UUID, reason string) ([]axtype.CancelledExecution, error) {
	rows, err := queries.ExecutionCancel(ctx, e, dbsqlc.ExecutionCancelParams{
		Ids: nonNilIDs(ids), JobIds: nonNilIDs(jobIDs), Reason: reason,
	})
	if err != nil {
		return nil, fmt.Errorf("error cancelling executions: %w", mapErr(err))
	}
	out := make([]axtype.CancelledExecution, len(rows))
	for i, r := range rows {
		out[i] = axtype.CancelledExecution{ID: r.ID, State: axtype.ExecutionState(r.State)}
	}
	return out, nil
}

func executionFromRow(r dbsqlc.AxAllExecution) *axtype.Execution {
	return &axtype.Execution{
		ID: r.ID, JobID: r.JobID, Cause: axtype.ExecutionCause(r.Cause), ScheduledFor: r.ScheduledFor.UTC(),
		FiredAt: r.FiredAt.UTC(), Misfired: r.Misfired, State: axtype.ExecutionState(r.State), Params: r.Params,
		ShardCount: int(r.ShardCount), Priority: int(r.Priority), StartedAt: utcPtr(r.StartedAt),
		FinishedAt: utcPtr(r.FinishedAt), CancelRequestedAt: utcPtr(r.CancelRequestedAt),
		CancelReason: deref(r.CancelReason), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		Error: deref(r.Error), TraceParent: deref(r.Traceparent), RetainUntil: utcPtr(r.RetainUntil),
		TriggerIndex: smallintPtr(r.TriggerIndex),
	}
}

func smallintPtr(v *int16) *int {
	if v == nil {
		return nil
	}
	i := int(*v)
	return &i
}

func nonNilIDs(ids []uuid.UUID) []uuid.UUID {
	if ids == nil {
		return []uuid.UUID{}
	}
	return ids
}

// ExecutionHasUnfinished reports whether a job has a pending or running
// execution.
func ExecutionHasUnfinished(ctx context.Context, e Executor, jobID uuid.UUID) (bool, error) {
	v, err := queries.ExecutionHasUnfinished(ctx, e, jobID)
	if err != nil {
		return false, fmt.Errorf("error checking unfinished executions of job %s: %w", jobID, mapErr(err))
	}
	return v, nil
}

// ExecutionHasUnfinishedOther reports whether a job has a pending or
// running execution other than execID.
func ExecutionHasUnfinishedOther(ctx context.Context, e Executor, jobID, execID uuid.UUID) (bool, error) {
	v, err := queries.ExecutionHasUnfinishedOther(ctx, e, dbsqlc.ExecutionHasUnfinishedOtherParams{JobID: jobID, ExecutionID: execID})
	if err != nil {
		return false, fmt.Errorf("error checking unfinished executions of job %s: %w", jobID, mapErr(err))
	}
	return v, nil
}

// ExecutionGroupByID returns the group of execution id's job; ErrNotFound
// when there is no such execution.
func ExecutionGroupByID(ctx context.Context, e Executor, id uuid.UUID) (string, error) {
	g, err := queries.ExecutionGroupByID(ctx, e, id)
	if err != nil {
		return "", fmt.Errorf("error getting group of execution %s: %w", id, mapErr(err))
	}
	return g, nil
}

// ExecutionInsertMany records fires and makes their tasks (one per shard,
// or for broadcast jobs one per agent live within live), in three
// set-based statements. A scheduled tick that has an execution already is
// left out, so a tick fires once whatever races. Runs of jobs with a shard
// generator get the params render makes (nil: such a run fails). The
// tasks are planned first and routed by route (nil: none is), then
// written once with their routes. The new tasks come back.
func ExecutionInsertMany(ctx context.Context, e Executor, execs []*axtype.NewExecution, live time.Duration, render axtype.ShardParamsFunc, route axtype.RouteFunc) ([]axtype.InsertedExecution, []*axtype.NewTask, error) {
	if len(execs) == 0 {
		return nil, nil, nil
	}
	p := dbsqlc.ExecutionInsertManyParams{}
	for _, x := range execs {
		p.Ids = append(p.Ids, x.ID)
		p.JobIds = append(p.JobIds, x.JobID)
		p.Causes = append(p.Causes, string(x.Cause))
		p.ScheduledFors = append(p.ScheduledFors, x.ScheduledFor)
		p.Misfired = append(p.Misfired, x.Misfired)
		p.Params = append(p.Params, []byte(x.Params))
		p.Priorities = append(p.Priorities, int32(deref(x.Priority)))
		p.PrioritySet = append(p.PrioritySet, x.Priority != nil)
		p.Traceparents = append(p.Traceparents, traceParentFor(x.ID, x.TraceParent))
		p.TriggerIndexes = append(p.TriggerIndexes, int16(derefOr(x.TriggerIndex, -1)))
	}
	rows, err := queries.ExecutionInsertMany(ctx, e, p)
	if err != nil {
		return nil, nil, fmt.Errorf("error inserting executions: %w", mapErr(err))
	}
	out := make([]axtype.InsertedExecution, len(rows))
	ids := make([]uuid.UUID, len(rows))
	gens := make([]generatorRow, len(rows))
	for i, r := range rows {
		out[i] = axtype.InsertedExecution{ID: r.ID, JobID: r.JobID, ScheduledFor: r.ScheduledFor.UTC(), FiredAt: r.FiredAt.UTC()}
		ids[i] = r.ID
		gens[i] = generatorRow{executionID: r.ID, jobID: r.JobID, kind: r.ShardGenerator, window: r.ShardWindowSeconds,
			timezone: r.Timezone, count: int(r.ShardCount), scheduledFor: r.ScheduledFor}
	}
	if len(ids) == 0 {
		return out, nil, nil
	}
	genIDs, genParams, err := generatedParams(gens, render)
	if err != nil {
		return nil, nil, err
	}
	planned, err := queries.TaskPlanForExecutions(ctx, e, dbsqlc.TaskPlanForExecutionsParams{
		ExecutionIds: ids, LiveSeconds: live.Seconds(), GeneratedIds: genIDs, GeneratedParams: genParams,
		MeasureMaxAgeSeconds: axtype.AdaptiveTimeoutMeasureMaxAge.Seconds(), MeasureMaxJobs: axtype.AdaptiveTimeoutMeasuresPerFire})
	if err != nil {
		return nil, nil, fmt.Errorf("error planning tasks: %w", mapErr(err))
	}
	tasks, err := taskRouteAndInsert(ctx, e, planned, route)
	if err != nil {
		return nil, nil, err
	}
	return out, tasks, nil
}

// taskRouteAndInsert routes planned tasks with route (nil: none is) and
// writes them once with their routes; it returns them as routing saw them.
func taskRouteAndInsert(ctx context.Context, e Executor, planned []dbsqlc.TaskPlanForExecutionsRow, route axtype.RouteFunc) ([]*axtype.NewTask, error) {
	tasks := make([]*axtype.NewTask, len(planned))
	var params []byte // the run's, on its first row only: its tasks share them
	for i, r := range planned {
		if i == 0 || r.ExecutionID != planned[i-1].ExecutionID {
			params = r.Params
		}
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("error generating task id: %w", err)
		}
		tasks[i] = &axtype.NewTask{ID: id, ExecutionID: r.ExecutionID, JobID: r.JobID, JobName: r.JobName,
			JobGroup: r.GroupName, ShardIndex: int(r.ShardIndex), ShardTotal: int(r.ShardTotal),
			ShardParam: r.ShardParam, Pinned: r.PinnedAgentID != nil, Agentless: r.Agentless,
			RouteStrategy: axtype.RouteStrategy(r.RouteStrategy), ExecutorKind: axtype.ExecutorKind(r.ExecutorKind),
			RouteKey: r.RouteKey, Params: params}
		if r.ConcurrencyTemplate != "" && !r.Agentless {
			tasks[i].ConcurrencyTemplate, tasks[i].ConcurrencyLimit = r.ConcurrencyTemplate, int(r.ConcurrencyLimit)
			tasks[i].ConcurrencyScope = axtype.ConcurrencyScope(r.JobID, r.GroupName, r.ConcurrencyGroup)
		}
		if err := json.Unmarshal(r.TargetLabels, &tasks[i].TargetLabels); err != nil {
			return nil, fmt.Errorf("error decoding target labels of job %s: %w", r.JobID, err)
		}
	}
	var routes []axtype.TaskRoute
	if route != nil && len(tasks) > 0 {
		var err error
		if routes, err = route(ctx, tasks); err != nil {
			return nil, err
		}
	}
	if err := taskInsertPlanned(ctx, e, planned, tasks, routes); err != nil {
		return nil, err
	}
	// A task whose concurrency key did not render was written failed: its
	// run ends now if that was its last open task.
	var failed []uuid.UUID
	for _, t := range tasks {
		if t.ConcurrencyError != "" && !slices.Contains(failed, t.ExecutionID) {
			failed = append(failed, t.ExecutionID)
		}
	}
	if len(failed) > 0 {
		if err := ExecutionFinalize(ctx, e, failed); err != nil {
			return nil, err
		}
	}
	return tasks, nil
}

// taskInsertPlanned writes planned tasks with their routes: a pinned
// task's agent is its preferred one, a routed task's the router's choice.
func taskInsertPlanned(ctx context.Context, e Executor, planned []dbsqlc.TaskPlanForExecutionsRow, tasks []*axtype.NewTask, routes []axtype.TaskRoute) error {
	if len(planned) == 0 {
		return nil
	}
	byTask := make(map[uuid.UUID]*axtype.TaskRoute, len(routes))
	for i := range routes {
		byTask[routes[i].TaskID] = &routes[i]
	}
	n := len(planned)
	p := dbsqlc.TaskInsertPlannedParams{Ids: make([]uuid.UUID, n), ExecutionIds: make([]uuid.UUID, n),
		JobIds: make([]uuid.UUID, n), ShardIndexes: make([]int32, n), ShardTotals: make([]int32, n),
		ShardParams: make([]string, n), Priorities: make([]int32, n), MaxAttempts: make([]int32, n),
		TimeoutSeconds: make([]int32, n), NotBefores: make([]time.Time, n), Preferred: make([]uuid.UUID, n),
		Fallback: make([]uuid.UUID, n), RouteKeys: make([]string, n), Pinned: make([]bool, n),
		RateClasses: make([]string, n), Agentless: make([]bool, n), ConcurrencyScopes: make([]string, n),
		ConcurrencyKeys: make([]string, n), ConcurrencyLimits: make([]int32, n), KeyErrors: make([]string, n),
		ParamsBytes: make([]int32, n), NoAgent: make([]bool, n), PoolIds: make([]int32, n)}
	for i, r := range planned {
		p.Ids[i], p.ExecutionIds[i], p.JobIds[i] = tasks[i].ID, r.ExecutionID, r.JobID
		p.ShardIndexes[i], p.ShardTotals[i], p.ShardParams[i] = r.ShardIndex, r.ShardTotal, r.ShardParam
		p.Priorities[i], p.MaxAttempts[i], p.TimeoutSeconds[i] = r.Priority, r.MaxAttempts, r.TimeoutSeconds
		p.NotBefores[i], p.RateClasses[i], p.Agentless[i] = r.NotBefore, r.RateClass, r.Agentless
		p.ParamsBytes[i] = int32(len(tasks[i].Params))
		p.PoolIds[i] = r.PoolID
		if t := tasks[i]; t.ConcurrencyTemplate != "" {
			switch {
			case t.ConcurrencyError != "":
				p.KeyErrors[i] = t.ConcurrencyError
			case t.ConcurrencyScope == "" || t.ConcurrencyLimit < 1:
				p.KeyErrors[i] = "concurrency key not rendered"
			default:
				p.ConcurrencyScopes[i], p.ConcurrencyKeys[i] = t.ConcurrencyScope, t.ConcurrencyKey
				p.ConcurrencyLimits[i] = int32(t.ConcurrencyLimit)
			}
		}
		switch route := byTask[tasks[i].ID]; {
		case r.PinnedAgentID != nil:
			p.Preferred[i], p.Pinned[i] = *r.PinnedAgentID, true
		case route != nil:
			p.Preferred[i], p.Fallback[i], p.RouteKeys[i] = route.Preferred, route.Fallback, route.RouteKey
			p.NoAgent[i] = route.NoAgent
		}
		tasks[i].Preferred, tasks[i].NotBefore = p.Preferred[i], r.NotBefore
	}
	if err := queries.TaskInsertPlanned(ctx, e, p); err != nil {
		return fmt.Errorf("error inserting tasks: %w", mapErr(err))
	}
	return nil
}

// ExecutionLock locks an execution until the transaction ends:
// results of its shards recorded concurrently then see each other, so the
// last one ends the execution.
func ExecutionLock(ctx context.Context, e Executor, executionID uuid.UUID) error {
	if err := queries.ExecutionLock(ctx, e, executionID); err != nil {
		return fmt.Errorf("error locking execution %s: %w", executionID, mapErr(err))
	}
	return nil
}

// ExecutionFinalize ends the executions among ids whose tasks all ended.
func ExecutionFinalize(ctx context.Context, e Executor, ids []uuid.UUID) error {
	_, err := executionFinalize(ctx, e, ids)
	return err
}

// executionFinalize is ExecutionFinalize returning the executions it ended.
func executionFinalize(ctx context.Context, e Executor, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	if len(ids) == 0 {
		return map[uuid.UUID]bool{}, nil
	}
	rows, err := queries.ExecutionFinalize(ctx, e, ids)
	if err != nil {
		return nil, fmt.Errorf("error finalizing executions: %w", mapErr(err))
	}
	ended := make(map[uuid.UUID]bool, len(rows))
	for _, id := range rows {
		ended[id] = true
	}
	return ended, nil
}
