package openapi

import (
	"encoding/json"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"
)

// jobToDB turns an API job into a definition with its defaults filled
// (by db.Job.FillDefaults, their one owner).
func jobToDB(j *Job, id uuid.UUID) (*db.Job, error) {
	route := deref(j.Route)
	shards := deref(j.Shards)
	retry := deref(j.Retry)
	misfire := deref(j.Misfire)
	out := &db.Job{
		ID: id, Name: j.Name, Group: j.Group, Owner: j.Owner, Description: j.Description,
		TriggerKind: db.TriggerKind(j.Trigger.Kind), CronExpr: j.Trigger.Cron, Timezone: j.Trigger.Timezone,
		IntervalSeconds: j.Trigger.IntervalSeconds, RunAt: j.Trigger.RunAt,
		ExecutorKind: db.ExecutorKind(j.Executor.Kind),
		Executor: db.ExecutorConfig{Command: j.Executor.Command, URL: j.Executor.URL,
			Headers: j.Executor.Headers, Body: j.Executor.Body, Handler: j.Executor.Handler},
		TargetLabels:  deref(j.Target).Labels,
		RouteStrategy: db.RouteStrategy(route.Strategy), RouteKey: route.Key,
		ShardCount: shards.Count, ShardParams: shards.Params,
		Priority: j.Priority, TimeoutSeconds: j.TimeoutSeconds,
		RetryMaxAttempts: retry.MaxAttempts, RetryBackoffSeconds: retry.BackoffSeconds,
		RetryBackoffMaxSeconds: retry.BackoffMaxSeconds,
		ConcurrencyPolicy:      db.ConcurrencyPolicy(j.ConcurrencyPolicy),
		MisfirePolicy:          db.MisfirePolicy(misfire.Policy),
		MisfireWindowSeconds:   misfire.WindowSeconds, MisfireMaxFires: misfire.MaxFires,
		RateLimitClass: j.RateLimitClass, CallbackURL: deref(j.Callback).URL, Params: json.RawMessage(j.Params),
		DegradeAction: db.DegradeAction(j.DegradeAction),
	}
	if out.ExecutorKind == db.ExecutorHTTP { // the schema's default fills method for every kind
		out.Executor.Method = j.Executor.Method
	}
	if g := shards.Generator; g != nil {
		out.ShardGenerator = &db.ShardGenerator{Kind: db.ShardGeneratorKind(g.Kind), WindowSeconds: g.WindowSeconds}
	}
	if shards.Range != nil { // as given: [-10, 0) is not the default range
		out.ShardRangeFrom, out.ShardRangeTo = shards.Range.From, shards.Range.To
	}
	out.FillDefaults()
	return out, nil
}

// jobFromDB shows a stored job with every setting spelled out.
func jobFromDB(j *db.Job) (*Job, error) {
	out := &Job{
		ID: j.ID.String(), Name: j.Name, Group: j.Group, Owner: j.Owner, Description: j.Description,
		Trigger: JobTrigger{Kind: string(j.TriggerKind), Cron: j.CronExpr, Timezone: j.Timezone,
			IntervalSeconds: j.IntervalSeconds, RunAt: j.RunAt},
		Executor:          jobExecutorFromDB(j.ExecutorKind, &j.Executor),
		Target:            &JobTarget{Labels: j.TargetLabels},
		Route:             &JobRoute{Strategy: string(j.RouteStrategy), Key: j.RouteKey},
		Shards:            jobShardsFromDB(j),
		Priority:          j.Priority,
		TimeoutSeconds:    j.TimeoutSeconds,
		Retry:             &JobRetry{MaxAttempts: j.RetryMaxAttempts, BackoffSeconds: j.RetryBackoffSeconds, BackoffMaxSeconds: j.RetryBackoffMaxSeconds},
		ConcurrencyPolicy: string(j.ConcurrencyPolicy),
		Misfire:           &JobMisfire{Policy: string(j.MisfirePolicy), WindowSeconds: j.MisfireWindowSeconds, MaxFires: j.MisfireMaxFires},
		RateLimitClass:    j.RateLimitClass,
		DegradeAction:     string(j.DegradeAction),
		Params:            Params(j.Params),
		SigningSecret:     j.SigningSecret,
		Paused:            j.Paused, PausedAt: j.PausedAt, NextFireAt: j.NextFireAt,
		LastFireAt: j.LastFireAt, LastScheduledFor: j.LastScheduledFor,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
	}
	if j.LastExecutionID != nil {
		out.LastExecutionID = j.LastExecutionID.String()
	}
	out.LastState = string(j.LastState)
	out.SetAsideAt, out.SetAsideReason = j.SetAsideAt, j.SetAsideReason
	if j.CallbackURL != "" {
		out.Callback = &JobCallback{URL: j.CallbackURL}
	}
	return out, nil
}

// jobShardsFromDB shows how a stored job splits its runs: a generator
// shows without the range it does not use, so the job can be PUT back.
func jobShardsFromDB(j *db.Job) *JobShards {
	if g := j.ShardGenerator; g != nil {
		return &JobShards{Count: j.ShardCount, Generator: &JobShardGenerator{Kind: string(g.Kind), WindowSeconds: g.WindowSeconds}}
	}
	return &JobShards{Count: j.ShardCount, Params: j.ShardParams, Range: &ShardRange{From: j.ShardRangeFrom, To: j.ShardRangeTo}}
}

// jobExecutorFromDB shows a stored executor of kind.
func jobExecutorFromDB(kind db.ExecutorKind, c *db.ExecutorConfig) JobExecutor {
	return JobExecutor{Kind: string(kind), Command: c.Command, URL: c.URL, Method: c.Method,
		Headers: c.Headers, Body: c.Body, Handler: c.Handler}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
