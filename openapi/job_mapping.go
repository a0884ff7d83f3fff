package openapi

import (
	"cmp"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"
)

// jobToDB turns an API job into a definition, filling defaults.
func jobToDB(j *Job, id uuid.UUID) (*db.Job, error) {
	executor := db.ExecutorConfig{Command: j.Executor.Command, URL: j.Executor.URL,
		Headers: j.Executor.Headers, Body: j.Executor.Body, Handler: j.Executor.Handler}
	if db.ExecutorKind(j.Executor.Kind) == db.ExecutorHTTP {
		executor.Method = cmp.Or(j.Executor.Method, "POST")
	}
	params := []byte(j.Params)
	if len(params) == 0 {
		params = []byte("{}")
	}
	route := deref(j.Route)
	shards := deref(j.Shards)
	retry := deref(j.Retry)
	misfire := deref(j.Misfire)
	out := &db.Job{
		ID: id, Name: j.Name, Group: cmp.Or(j.Group, "default"), Owner: j.Owner, Description: j.Description,
		TriggerKind: db.TriggerKind(j.Trigger.Kind), CronExpr: j.Trigger.Cron, Timezone: cmp.Or(j.Trigger.Timezone, "UTC"),
		IntervalSeconds: j.Trigger.IntervalSeconds, RunAt: j.Trigger.RunAt,
		ExecutorKind: db.ExecutorKind(j.Executor.Kind), Executor: executor,
		TargetLabels:  deref(j.Target).Labels,
		RouteStrategy: cmp.Or(db.RouteStrategy(route.Strategy), db.RouteRoundRobin), RouteKey: route.Key,
		ShardCount: cmp.Or(shards.Count, 1), ShardParams: shards.Params,
		ShardRangeFrom: 0, ShardRangeTo: db.DefaultShardRangeTo,
		Priority: j.Priority, TimeoutSeconds: cmp.Or(j.TimeoutSeconds, defaultTimeoutSeconds(j)),
		RetryMaxAttempts:       cmp.Or(retry.MaxAttempts, 1),
		RetryBackoffSeconds:    cmp.Or(retry.BackoffSeconds, 5),
		RetryBackoffMaxSeconds: cmp.Or(retry.BackoffMaxSeconds, max(600, retry.BackoffSeconds)),
		ConcurrencyPolicy:      cmp.Or(db.ConcurrencyPolicy(j.ConcurrencyPolicy), db.ConcurrencyAllow),
		MisfirePolicy:          cmp.Or(db.MisfirePolicy(misfire.Policy), db.MisfireFireOnce),
		MisfireWindowSeconds:   cmp.Or(misfire.WindowSeconds, 86400),
		MisfireMaxFires:        cmp.Or(misfire.MaxFires, 100),
		RateLimitClass:         j.RateLimitClass, CallbackURL: deref(j.Callback).URL, Params: params,
		DegradeAction: cmp.Or(db.DegradeAction(j.DegradeAction), db.DegradeWait),
	}
	if shards.Range != nil { // as given: [-10, 0) is not the default range
		out.ShardRangeFrom, out.ShardRangeTo = shards.Range.From, shards.Range.To
	}
	return out, nil
}

// jobFromDB shows a stored job with every setting spelled out.
func jobFromDB(j *db.Job) (*Job, error) {
	out := &Job{
		ID: j.ID.String(), Name: j.Name, Group: j.Group, Owner: j.Owner, Description: j.Description,
		Trigger: JobTrigger{Kind: string(j.TriggerKind), Cron: j.CronExpr, Timezone: j.Timezone,
			IntervalSeconds: j.IntervalSeconds, RunAt: j.RunAt},
		Executor: jobExecutorFromDB(j.ExecutorKind, &j.Executor),
		Target:   &JobTarget{Labels: j.TargetLabels},
		Route:    &JobRoute{Strategy: string(j.RouteStrategy), Key: j.RouteKey},
		Shards: &JobShards{Count: j.ShardCount, Params: j.ShardParams,
			Range: &ShardRange{From: j.ShardRangeFrom, To: j.ShardRangeTo}},
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

// defaultTimeoutSeconds is a job's timeout when it names none: an hour,
// or the most an agentless HTTP task may take.
func defaultTimeoutSeconds(j *Job) int {
	if agentlessHTTP(j) {
		return maxAgentlessTimeoutSeconds
	}
	return 3600
}
