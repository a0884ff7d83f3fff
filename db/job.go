package db

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
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
	ExecutorKind    ExecutorKind
	Executor        ExecutorConfig
	TargetLabels    map[string]string
	RouteStrategy   RouteStrategy
	RouteKey        string
	ShardCount      int
	ShardParams     []string
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
	Params          json.RawMessage // object handed to every run
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

// JobInsert stores a new job and its trigger row (with job.NextFireAt and
// job.Paused) and returns the stored job.
func JobInsert(ctx context.Context, e Executor, job *Job) (*Job, error) {
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
	return jobFromRow(row, trig, "", nil)
}

// JobUpdate replaces the definition of job.ID and sets its next fire time;
// the paused flag and fire history stay as they are.
func JobUpdate(ctx context.Context, e Executor, job *Job) (*Job, error) {
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
	})
	if err != nil {
		return nil, fmt.Errorf("error updating job: %w", mapErr(err))
	}
	trig, err := TriggerSetNextFire(ctx, e, job.ID, job.NextFireAt)
	if err != nil {
		return nil, err
	}
	var measure *TimeoutMeasure
	if job.TimeoutMode == TimeoutAdaptive {
		if measure, err = JobTimeoutMeasureGet(ctx, e, job.ID); err != nil {
			return nil, err
		}
	}
	return jobFromRow(row, *trig, "", measure)
}

// JobGetByID returns one job.
func JobGetByID(ctx context.Context, e Executor, id uuid.UUID) (*Job, error) {
	row, err := queries.JobGetByID(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting job %s: %w", id, mapErr(err))
	}
	return jobFromRow(row.AxJob, row.AxTrigger, row.LastState,
		timeoutMeasure(row.TimeoutSamples, row.TimeoutP95Ms, row.TimeoutComputedAt))
}

// JobGetByIDForUpdate returns one job and locks its rows until the
// transaction ends, so concurrent updates of one job serialize.
func JobGetByIDForUpdate(ctx context.Context, e Executor, id uuid.UUID) (*Job, error) {
	row, err := queries.JobGetByIDForUpdate(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error locking job %s: %w", id, mapErr(err))
	}
	return jobFromRow(row.AxJob, row.AxTrigger, row.LastState,
		timeoutMeasure(row.TimeoutSamples, row.TimeoutP95Ms, row.TimeoutComputedAt))
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
func JobList(ctx context.Context, e Executor, p *JobListParams) ([]*Job, error) {
	rows, err := queries.JobList(ctx, e, dbsqlc.JobListParams{
		After: p.After, GroupName: p.Group, Name: p.Name, Owner: p.Owner, Paused: p.Paused, Groups: p.Groups, Max: int32(p.Limit),
	})
	if err != nil {
		return nil, fmt.Errorf("error listing jobs: %w", mapErr(err))
	}
	jobs := make([]*Job, 0, len(rows))
	for _, r := range rows {
		j, err := jobFromRow(r.AxJob, r.AxTrigger, r.LastState,
			timeoutMeasure(r.TimeoutSamples, r.TimeoutP95Ms, r.TimeoutComputedAt))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// JobDelete removes a job and its trigger row.
func JobDelete(ctx context.Context, e Executor, id uuid.UUID) error {
	n, err := queries.JobDelete(ctx, e, id)
	if err != nil {
		return fmt.Errorf("error deleting job %s: %w", id, mapErr(err))
	}
	if n == 0 {
		return fmt.Errorf("error deleting job %s: %w", id, ErrNotFound)
	}
	return nil
}

func jobParams(j *Job) (dbsqlc.JobInsertParams, error) {
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
	return dbsqlc.JobInsertParams{
		ID: j.ID, Name: j.Name, GroupName: j.Group, Owner: j.Owner, Description: j.Description,
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
		// A definition made before timeout modes (zero) is fixed.
		TimeoutMode: dbsqlc.AxTimeoutMode(cmp.Or(j.TimeoutMode, TimeoutFixed)),
	}, nil
}

func jobFromRow(r dbsqlc.AxJob, t dbsqlc.AxTrigger, lastState string, measure *TimeoutMeasure) (*Job, error) {
	j := &Job{
		ID: r.ID, Name: r.Name, Group: r.GroupName, Owner: r.Owner, Description: r.Description,
		TriggerKind: TriggerKind(r.TriggerKind), CronExpr: deref(r.CronExpr), Timezone: r.Timezone,
		IntervalSeconds: deref(r.IntervalSeconds), RunAt: utcPtr(r.RunAt),
		ExecutorKind:  ExecutorKind(r.ExecutorKind),
		RouteStrategy: RouteStrategy(r.RouteStrategy), RouteKey: r.RouteKey,
		ShardCount: int(r.ShardCount), Priority: int(r.Priority), TimeoutSeconds: int(r.TimeoutSeconds),
		ShardRangeFrom: r.ShardRangeFrom, ShardRangeTo: r.ShardRangeTo,
		ShardGenerator:   generatorFromColumns(r.ShardGenerator, r.ShardWindowSeconds),
		RetryMaxAttempts: int(r.RetryMaxAttempts), RetryBackoffSeconds: int(r.RetryBackoffSeconds),
		RetryBackoffMaxSeconds: int(r.RetryBackoffMaxSeconds),
		ConcurrencyPolicy:      ConcurrencyPolicy(r.ConcurrencyPolicy), MisfirePolicy: MisfirePolicy(r.MisfirePolicy),
		MisfireWindowSeconds: int(r.MisfireWindowSeconds), MisfireMaxFires: int(r.MisfireMaxFires),
		RateLimitClass: deref(r.RateLimitClass), CallbackURL: deref(r.CallbackUrl), DegradeAction: DegradeAction(r.DegradeAction),
		CallbackOrdered: r.CallbackOrdered,
		Params:          r.Params, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		NextFireAt: utcPtr(t.NextFireAt), Paused: t.Paused, PausedAt: utcPtr(t.PausedAt),
		LastFireAt: utcPtr(t.LastFireAt), LastScheduledFor: utcPtr(t.LastScheduledFor),
		LastExecutionID: t.LastExecutionID, LastState: ExecutionState(lastState),
		SetAsideAt: utcPtr(t.SetAsideAt), SetAsideReason: deref(t.SetAsideReason), PausedReason: deref(t.PausedReason),
		ManagedBy: deref(r.ManagedBy), DeclaredVersion: deref(r.DeclaredVersion), DeclaredIn: deref(r.DeclaredIn),
		TimeoutMode: TimeoutMode(r.TimeoutMode), TimeoutMeasure: measure,
		HistoryRetentionSeconds:       int(deref(r.HistoryRetentionSeconds)),
		HistoryFailedRetentionSeconds: int(deref(r.HistoryFailedRetentionSeconds)),
	}
	var err error
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

// FailingJob is a job with failed runs in the observed window.
type FailingJob struct {
	Name, Group, Owner  string
	Finished, Failed    int64 // runs that ended in the window, and failed ones
	ConsecutiveFailures int64 // latest runs in a row that failed
}

// JobListFailing returns jobs with failures within window.
func JobListFailing(ctx context.Context, e Executor, window time.Duration) ([]FailingJob, error) {
	rows, err := queries.JobListFailing(ctx, e, window.Seconds())
	if err != nil {
		return nil, fmt.Errorf("error reading failing jobs: %w", mapErr(err))
	}
	out := make([]FailingJob, len(rows))
	for i, r := range rows {
		out[i] = FailingJob{Name: r.Name, Group: r.GroupName, Owner: r.Owner, Finished: r.Finished,
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
