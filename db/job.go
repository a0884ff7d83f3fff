package db

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// JobInsert stores a new job and its trigger row (with job.NextFireAt and
// job.Paused) and returns the stored job.
func JobInsert(ctx context.Context, e Executor, job *axtype.Job) (*axtype.Job, error) {
	p, err := jobParams(job)
	if err != nil {
		return nil, err
	}
	row, err := queries.JobInsert(ctx, e, p)
	if err != nil {
		return nil, fmt.Errorf("error inserting job: %w", mapErr(err))
	}
	trig, err := queries.TriggerInsert(ctx, e, dbsqlc.TriggerInsertParams{
		JobID: row.ID, NextFireAt: job.NextFireAt, Paused: job.Paused,
	})
	if err != nil {
		return nil, fmt.Errorf("error inserting trigger: %w", mapErr(err))
	}
	return jobSaved(ctx, e, job, row, trig, nil)
}

// jobSaved stores the upstreams of a job just written and returns it as read.
func jobSaved(ctx context.Context, e Executor, job *axtype.Job, row dbsqlc.AxJob, trig dbsqlc.AxTrigger, measure *axtype.TimeoutMeasure) (*axtype.Job, error) {
	saved, err := jobFromRow(row, trig, "", measure)
	if err != nil {
		return nil, err
	}
	saved.AfterMode, saved.AfterUpstream = job.AfterMode, job.AfterUpstream
	if err := afterSave(ctx, e, saved); err != nil {
		return nil, err
	}
	return saved, afterFill(ctx, e, saved)
}

// JobUpdate replaces the definition of job.ID and sets its next fire time;
// the paused flag and fire history stay as they are.
func JobUpdate(ctx context.Context, e Executor, job *axtype.Job) (*axtype.Job, error) {
	p, err := jobParams(job)
	if err != nil {
		return nil, err
	}
	row, err := queries.JobUpdate(ctx, e, dbsqlc.JobUpdateParams{
		ID: p.ID, Name: p.Name, GroupName: p.GroupName, Owner: p.Owner, Description: p.Description,
		TriggerKind: p.TriggerKind, CronExpr: p.CronExpr, Timezone: p.Timezone,
		IntervalSeconds: p.IntervalSeconds, RunAt: p.RunAt,
		ExecutorKind: p.ExecutorKind, Executor: p.Executor, TargetLabels: p.TargetLabels,
		RouteStrategy: p.RouteStrategy, RouteKey: p.RouteKey,
		ShardCount: p.ShardCount, ShardParams: p.ShardParams, Priority: p.Priority,
		ShardRangeFrom: p.ShardRangeFrom, ShardRangeTo: p.ShardRangeTo,
		TimeoutSeconds: p.TimeoutSeconds, RetryMaxAttempts: p.RetryMaxAttempts,
		RetryBackoffSeconds: p.RetryBackoffSeconds, RetryBackoffMaxSeconds: p.RetryBackoffMaxSeconds,
		ConcurrencyPolicy: p.ConcurrencyPolicy, MisfirePolicy: p.MisfirePolicy,
		MisfireWindowSeconds: p.MisfireWindowSeconds, MisfireMaxFires: p.MisfireMaxFires,
		RateLimitClass: p.RateLimitClass, CallbackUrl: p.CallbackUrl, Params: p.Params,
		DegradeAction: p.DegradeAction, Agentless: p.Agentless, TimeoutMode: p.TimeoutMode,
		ShardGenerator: p.ShardGenerator, ShardWindowSeconds: p.ShardWindowSeconds,
		HistoryRetentionSeconds: p.HistoryRetentionSeconds, HistoryFailedRetentionSeconds: p.HistoryFailedRetentionSeconds,
		CallbackOrdered: p.CallbackOrdered,
		ActiveFrom:      p.ActiveFrom, ActiveUntil: p.ActiveUntil, JitterSeconds: p.JitterSeconds,
		Triggers: p.Triggers, Exclude: p.Exclude,
		ConcurrencyKey: p.ConcurrencyKey, ConcurrencyLimit: p.ConcurrencyLimit, ConcurrencyGroup: p.ConcurrencyGroup,
	})
	if err != nil {
		return nil, fmt.Errorf("error updating job: %w", mapErr(err))
	}
	trig, err := TriggerSetNextFire(ctx, e, job.ID, job.NextFireAt)
	if err != nil {
		return nil, err
	}
	var measure *axtype.TimeoutMeasure
	if job.TimeoutMode == axtype.TimeoutAdaptive {
		if measure, err = JobTimeoutMeasureGet(ctx, e, job.ID); err != nil {
			return nil, err
		}
	}
	return jobSaved(ctx, e, job, row, *trig, measure)
}

// JobGetByID returns one job.
func JobGetByID(ctx context.Context, e Executor, id uuid.UUID) (*axtype.Job, error) {
	row, err := queries.JobGetByID(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting job %s: %w", id, mapErr(err))
	}
	j, err := jobFromRow(row.AxJob, row.AxTrigger, row.LastState,
		timeoutMeasure(row.TimeoutSamples, row.TimeoutP95Ms, row.TimeoutComputedAt))
	if err != nil {
		return nil, err
	}
	return j, afterFill(ctx, e, j)
}

// JobGetByIDForUpdate returns one job and locks its rows until the
// transaction ends, so concurrent updates of one job serialize.
func JobGetByIDForUpdate(ctx context.Context, e Executor, id uuid.UUID) (*axtype.Job, error) {
	row, err := queries.JobGetByIDForUpdate(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error locking job %s: %w", id, mapErr(err))
	}
	j, err := jobFromRow(row.AxJob, row.AxTrigger, row.LastState,
		timeoutMeasure(row.TimeoutSamples, row.TimeoutP95Ms, row.TimeoutComputedAt))
	if err != nil {
		return nil, err
	}
	return j, afterFill(ctx, e, j)
}

// JobListParams filters and pages JobList. Nil filters match everything.
type JobListParams struct {
	After  *uuid.UUID // last id of the previous page
	Group  *string
	Name   *string
	Owner  *string
	Paused *bool
	Groups []string // only jobs of these groups; nil: all
	Limit  int
}

// JobList returns up to Limit jobs in id (creation) order.
func JobList(ctx context.Context, e Executor, p *JobListParams) ([]*axtype.Job, error) {
	rows, err := queries.JobList(ctx, e, dbsqlc.JobListParams{
		After: p.After, GroupName: p.Group, Name: p.Name, Owner: p.Owner, Paused: p.Paused, Groups: p.Groups, Max: int32(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("error listing jobs: %w", mapErr(err))
	}
	jobs := make([]*axtype.Job, 0, len(rows))
	for _, r := range rows {
		j, err := jobFromRow(r.AxJob, r.AxTrigger, r.LastState,
			timeoutMeasure(r.TimeoutSamples, r.TimeoutP95Ms, r.TimeoutComputedAt))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, afterFill(ctx, e, jobs...)
}

// JobDelete removes a job and its trigger row.
func JobDelete(ctx context.Context, e Executor, id uuid.UUID) error {
	n, err := queries.JobDelete(ctx, e, id)
	if err != nil {
		return fmt.Errorf("error deleting job %s: %w", id, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("error deleting job %s: %w", id, axtype.ErrNotFound)
	}
	return nil
}

func jobParams(j *axtype.Job) (dbsqlc.JobInsertParams, error) {
	labels, err := json.Marshal(nonNilMap(j.TargetLabels))
	if err != nil {
		return dbsqlc.JobInsertParams{}, fmt.Errorf("error encoding target labels: %w", err)
	}
	shardParams, err := json.Marshal(nonNilSlice(j.ShardParams))
	if err != nil {
		return dbsqlc.JobInsertParams{}, fmt.Errorf("error encoding shard params: %w", err)
	}
	executor, err := json.Marshal(j.Executor)
	if err != nil {
		return dbsqlc.JobInsertParams{}, fmt.Errorf("error encoding executor: %w", err)
	}
	generator, window := generatorColumns(j.ShardGenerator)
	triggers, err := triggersJSON(j.Triggers)
	if err != nil {
		return dbsqlc.JobInsertParams{}, err
	}
	return dbsqlc.JobInsertParams{
		Triggers: triggers,
		ID:       j.ID, Name: j.Name, GroupName: j.Group, Owner: j.Owner, Description: j.Description,
		TriggerKind: dbsqlc.AxTriggerKind(j.TriggerKind), CronExpr: nilIfEmpty(j.CronExpr),
		Timezone: j.Timezone, IntervalSeconds: nilIfZero(j.IntervalSeconds), RunAt: j.RunAt,
		ExecutorKind: dbsqlc.AxExecutorKind(j.ExecutorKind), Executor: executor,
		TargetLabels: labels, RouteStrategy: dbsqlc.AxRouteStrategy(j.RouteStrategy), RouteKey: j.RouteKey,
		ShardCount: int32(j.ShardCount), ShardParams: shardParams, Priority: int32(j.Priority),
		ShardRangeFrom: j.ShardRangeFrom, ShardRangeTo: j.ShardRangeTo,
		TimeoutSeconds: int32(j.TimeoutSeconds), RetryMaxAttempts: int32(j.RetryMaxAttempts),
		RetryBackoffSeconds: int32(j.RetryBackoffSeconds), RetryBackoffMaxSeconds: int32(j.RetryBackoffMaxSeconds),
		ConcurrencyPolicy:    dbsqlc.AxConcurrencyPolicy(j.ConcurrencyPolicy),
		MisfirePolicy:        dbsqlc.AxMisfirePolicy(j.MisfirePolicy),
		MisfireWindowSeconds: int32(j.MisfireWindowSeconds), MisfireMaxFires: int32(j.MisfireMaxFires),
		RateLimitClass: nilIfEmpty(j.RateLimitClass), CallbackUrl: nilIfEmpty(j.CallbackURL),
		CallbackOrdered: j.CallbackOrdered && j.CallbackURL != "",
		Params:          jsonOr(j.Params, "{}"), DegradeAction: dbsqlc.AxDegradeAction(j.DegradeAction),
		Agentless: j.Agentless(), ShardGenerator: generator, ShardWindowSeconds: window,
		HistoryRetentionSeconds:       nilIfZero(int32(j.HistoryRetentionSeconds)),
		HistoryFailedRetentionSeconds: nilIfZero(int32(j.HistoryFailedRetentionSeconds)),
		ActiveFrom:                    j.ActiveFrom, ActiveUntil: j.ActiveUntil, JitterSeconds: int32(j.JitterSeconds),
		Exclude:        append([]string{}, j.Exclude...), // never NULL; nil and empty compare equal
		ConcurrencyKey: j.ConcurrencyKey, ConcurrencyGroup: j.ConcurrencyGroup,
		ConcurrencyLimit: nilIfZero(int32(j.ConcurrencyLimit)),
		// A definition made before timeout modes (zero) is fixed.
		TimeoutMode: dbsqlc.AxTimeoutMode(cmp.Or(j.TimeoutMode, axtype.TimeoutFixed)),
	}, nil
}

func jobFromRow(r dbsqlc.AxJob, t dbsqlc.AxTrigger, lastState string, measure *axtype.TimeoutMeasure) (*axtype.Job, error) {
	j := &axtype.Job{
		ID: r.ID, Name: r.Name, Group: r.GroupName, Owner: r.Owner, Description: r.Description,
		TriggerKind: axtype.TriggerKind(r.TriggerKind), CronExpr: deref(r.CronExpr), Timezone: r.Timezone,
		IntervalSeconds: deref(r.IntervalSeconds), RunAt: utcPtr(r.RunAt),
		ExecutorKind:  axtype.ExecutorKind(r.ExecutorKind),
		RouteStrategy: axtype.RouteStrategy(r.RouteStrategy), RouteKey: r.RouteKey,
		ShardCount: int(r.ShardCount), Priority: int(r.Priority), TimeoutSeconds: int(r.TimeoutSeconds),
		ShardRangeFrom: r.ShardRangeFrom, ShardRangeTo: r.ShardRangeTo,
		ShardGenerator:   generatorFromColumns(r.ShardGenerator, r.ShardWindowSeconds),
		RetryMaxAttempts: int(r.RetryMaxAttempts), RetryBackoffSeconds: int(r.RetryBackoffSeconds),
		RetryBackoffMaxSeconds: int(r.RetryBackoffMaxSeconds),
		ConcurrencyPolicy:      axtype.ConcurrencyPolicy(r.ConcurrencyPolicy), MisfirePolicy: axtype.MisfirePolicy(r.MisfirePolicy),
		MisfireWindowSeconds: int(r.MisfireWindowSeconds), MisfireMaxFires: int(r.MisfireMaxFires),
		RateLimitClass: deref(r.RateLimitClass), CallbackURL: deref(r.CallbackUrl), DegradeAction: axtype.DegradeAction(r.DegradeAction),
		CallbackOrdered: r.CallbackOrdered,
		ActiveFrom:      utcPtr(r.ActiveFrom), ActiveUntil: utcPtr(r.ActiveUntil), JitterSeconds: int(r.JitterSeconds),
		Exclude:        r.Exclude,
		ConcurrencyKey: r.ConcurrencyKey, ConcurrencyLimit: int(deref(r.ConcurrencyLimit)), ConcurrencyGroup: r.ConcurrencyGroup,
		Params: r.Params, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		NextFireAt: utcPtr(t.NextFireAt), Paused: t.Paused, PausedAt: utcPtr(t.PausedAt),
		LastFireAt: utcPtr(t.LastFireAt), LastScheduledFor: utcPtr(t.LastScheduledFor),
		LastExecutionID: t.LastExecutionID, LastState: axtype.ExecutionState(lastState),
		SetAsideAt: utcPtr(t.SetAsideAt), SetAsideReason: deref(t.SetAsideReason), PausedReason: deref(t.PausedReason),
		ManagedBy: deref(r.ManagedBy), DeclaredVersion: deref(r.DeclaredVersion), DeclaredIn: deref(r.DeclaredIn),
		TimeoutMode: axtype.TimeoutMode(r.TimeoutMode), TimeoutMeasure: measure,
		HistoryRetentionSeconds:       int(deref(r.HistoryRetentionSeconds)),
		HistoryFailedRetentionSeconds: int(deref(r.HistoryFailedRetentionSeconds)),
	}
	var err error
	if j.Triggers, err = triggersFromJSON(r.ID, r.Triggers); err != nil {
		return nil, err
	}
	if j.Executor, err = executorConfigFromJSON(r.Executor); err != nil {
		return nil, fmt.Errorf("job %s: %w", r.ID, err)
	}
	if err := json.Unmarshal(r.TargetLabels, &j.TargetLabels); err != nil {
		return nil, fmt.Errorf("error decoding target labels of job %s: %w", r.ID, err)
	}
	if err := json.Unmarshal(r.ShardParams, &j.ShardParams); err != nil {
		return nil, fmt.Errorf("error decoding shard params of job %s: %w", r.ID, err)
	}
	return j, nil
}

// JobGroupByID returns the group of job id; ErrNotFound when there is no
// such job.
func JobGroupByID(ctx context.Context, e Executor, id uuid.UUID) (string, error) {
	g, err := queries.JobGroupByID(ctx, e, id)
	if err != nil {
		return "", fmt.Errorf("error getting group of job %s: %w", id, mapErr(err))
	}
	return g, nil
}

// JobListFailing returns jobs with failures within window.
func JobListFailing(ctx context.Context, e Executor, window time.Duration) ([]axtype.FailingJob, error) {
	rows, err := queries.JobListFailing(ctx, e, window.Seconds())
	if err != nil {
		return nil, fmt.Errorf("error reading failing jobs: %w", mapErr(err))
	}
	out := make([]axtype.FailingJob, len(rows))
	for i, r := range rows {
		out[i] = axtype.FailingJob{Name: r.Name, Group: r.GroupName, Owner: r.Owner, Finished: r.Finished,
			Failed: r.Failed, ConsecutiveFailures: r.ConsecutiveFailures}
	}
	return out, nil
}

// JobExisting says which of ids are jobs.
func JobExisting(ctx context.Context, e Executor, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	found, err := queries.JobExisting(ctx, e, ids)
	if err != nil {
		return nil, fmt.Errorf("error looking up jobs: %w", mapErr(err))
	}
	out := make(map[uuid.UUID]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}
