package openapi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// jobToDB turns an API job into a definition with its defaults filled
// (by axtype.Job.FillDefaults, their one owner).
func jobToDB(j *Job, id uuid.UUID) (*axtype.Job, error) {
	out := jobDefinition(j, id)
	out.FillDefaults()
	return out, nil
}

// jobDefinition turns an API job into a definition as given, defaults not
// filled (what queue.ValidateJob checks).
func jobDefinition(j *Job, id uuid.UUID) *axtype.Job {
	route := deref(j.Route)
	shards := deref(j.Shards)
	retry := deref(j.Retry)
	misfire := deref(j.Misfire)
	trig := deref(j.Trigger)
	if len(j.Triggers) > 0 { // the job's columns hold the first
		first := j.Triggers[0]
		trig = JobTrigger{Kind: first.Kind, Cron: first.Cron, Timezone: first.Timezone, IntervalSeconds: first.IntervalSeconds}
	}
	out := &axtype.Job{
		ID: id, Name: j.Name, Group: j.Group, Owner: j.Owner, Description: j.Description,
		TriggerKind: axtype.TriggerKind(trig.Kind), CronExpr: trig.Cron, Timezone: trig.Timezone,
		IntervalSeconds: trig.IntervalSeconds, RunAt: trig.RunAt, Triggers: triggerSpecs(j.Triggers),
		ExecutorKind: axtype.ExecutorKind(j.Executor.Kind), Executor: jobExecutorToDB(&j.Executor),
		TargetLabels:  deref(j.Target).Labels,
		RouteStrategy: axtype.RouteStrategy(route.Strategy), RouteKey: route.Key,
		ShardCount: shards.Count, ShardParams: shards.Params,
		Priority: j.Priority, TimeoutSeconds: j.TimeoutSeconds,
		RetryMaxAttempts: retry.MaxAttempts, RetryBackoffSeconds: retry.BackoffSeconds,
		RetryBackoffMaxSeconds: retry.BackoffMaxSeconds,
		ConcurrencyPolicy:      axtype.ConcurrencyPolicy(j.ConcurrencyPolicy),
		MisfirePolicy:          axtype.MisfirePolicy(misfire.Policy),
		MisfireWindowSeconds:   misfire.WindowSeconds, MisfireMaxFires: misfire.MaxFires,
		ActiveFrom: utcTime(j.ActiveFrom), ActiveUntil: utcTime(j.ActiveUntil), JitterSeconds: j.JitterSeconds,
		Exclude:        j.Exclude,
		RateLimitClass: j.RateLimitClass, CallbackURL: deref(j.Callback).URL, CallbackOrdered: deref(j.Callback).Ordered, Params: json.RawMessage(j.Params),
		DegradeAction: axtype.DegradeAction(j.DegradeAction), TimeoutMode: axtype.TimeoutMode(j.TimeoutMode),
		HistoryRetentionSeconds:       deref(j.History).RetentionSeconds,
		HistoryFailedRetentionSeconds: deref(j.History).FailedRetentionSeconds,
	}
	// Mapped for any kind, so that the engine refuses them on another;
	// left out, an after trigger waits for all its upstreams, each to
	// succeed.
	after := out.TriggerKind == axtype.TriggerAfter
	out.AfterMode = axtype.AfterMode(trig.Mode)
	if after && trig.Mode == "" {
		out.AfterMode = axtype.AfterAll
	}
	for _, u := range trig.Upstream {
		on := axtype.AfterOn(u.On)
		if after && u.On == "" {
			on = axtype.AfterOnSuccess
		}
		out.AfterUpstream = append(out.AfterUpstream, axtype.AfterUpstream{Job: u.Job, On: on})
	}
	if g := shards.Generator; g != nil {
		out.ShardGenerator = &axtype.ShardGenerator{Kind: axtype.ShardGeneratorKind(g.Kind), WindowSeconds: g.WindowSeconds}
	}
	if shards.Range != nil { // as given: [-10, 0) is not the default range
		out.ShardRangeFrom, out.ShardRangeTo = shards.Range.From, shards.Range.To
	}
	if c := j.Concurrency; c != nil {
		out.ConcurrencyKey, out.ConcurrencyLimit, out.ConcurrencyGroup = c.Key, c.Limit, c.Group
	}
	return out
}

// upstreamFromDB shows the upstreams of an after trigger.
func upstreamFromDB(ups []axtype.AfterUpstream) []JobUpstream {
	if len(ups) == 0 {
		return nil
	}
	out := make([]JobUpstream, len(ups))
	for i, u := range ups {
		out[i] = JobUpstream{Job: u.Job, On: string(u.On)}
	}
	return out
}

// utcTime is t in UTC, nil kept.
func utcTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// jobHistoryFromDB shows a job's retention override; nil: the server's.
func jobHistoryFromDB(j *axtype.Job) *JobHistory {
	if j.HistoryRetentionSeconds == 0 && j.HistoryFailedRetentionSeconds == 0 {
		return nil
	}
	return &JobHistory{RetentionSeconds: j.HistoryRetentionSeconds, FailedRetentionSeconds: j.HistoryFailedRetentionSeconds}
}

// jobFromDB shows a stored job with every setting spelled out, its
// write-only values (header values, URL credentials) as queue.Redacted
// whoever asks.
func jobFromDB(j *axtype.Job) (*Job, error) {
	j = queue.RedactJob(j)
	out := &Job{
		Triggers: jobTriggersFromDB(j.Triggers),
		ID:       j.ID.String(), Name: j.Name, Group: j.Group, Owner: j.Owner, Description: j.Description,
		Trigger: &JobTrigger{Kind: string(j.TriggerKind), Cron: j.CronExpr, Timezone: j.Timezone,
			IntervalSeconds: j.IntervalSeconds, RunAt: j.RunAt, Mode: string(j.AfterMode), Upstream: upstreamFromDB(j.AfterUpstream)},
		Executor:          jobExecutorFromDB(j.ExecutorKind, &j.Executor),
		Target:            &JobTarget{Labels: j.TargetLabels},
		Route:             &JobRoute{Strategy: string(j.RouteStrategy), Key: j.RouteKey},
		Shards:            jobShardsFromDB(j),
		Priority:          j.Priority,
		TimeoutSeconds:    j.TimeoutSeconds,
		TimeoutMode:       string(j.TimeoutMode),
		Retry:             &JobRetry{MaxAttempts: j.RetryMaxAttempts, BackoffSeconds: j.RetryBackoffSeconds, BackoffMaxSeconds: j.RetryBackoffMaxSeconds},
		History:           jobHistoryFromDB(j),
		ConcurrencyPolicy: string(j.ConcurrencyPolicy),
		Misfire:           &JobMisfire{Policy: string(j.MisfirePolicy), WindowSeconds: j.MisfireWindowSeconds, MaxFires: j.MisfireMaxFires},
		ActiveFrom:        j.ActiveFrom, ActiveUntil: j.ActiveUntil, JitterSeconds: j.JitterSeconds,
		Exclude:        j.Exclude,
		RateLimitClass: j.RateLimitClass,
		DegradeAction:  string(j.DegradeAction),
		Params:         Params(j.Params),
		SigningSecret:  j.SigningSecret,
		Paused:         j.Paused, PausedAt: j.PausedAt, NextFireAt: j.NextFireAt,
		LastFireAt: j.LastFireAt, LastScheduledFor: j.LastScheduledFor,
		CreatedAt: j.CreatedAt, UpdatedAt: j.UpdatedAt,
	}
	if j.LastExecutionID != nil {
		out.LastExecutionID = j.LastExecutionID.String()
	}
	out.LastState = string(j.LastState)
	out.SetAsideAt, out.SetAsideReason = j.SetAsideAt, j.SetAsideReason
	out.PausedReason, out.ManagedBy, out.DeclaredVersion, out.DeclaredIn = j.PausedReason, j.ManagedBy, j.DeclaredVersion, j.DeclaredIn
	if j.CallbackURL != "" {
		out.Callback = &JobCallback{URL: j.CallbackURL, Ordered: j.CallbackOrdered}
	}
	if j.ConcurrencyKey != "" {
		out.Concurrency = &JobConcurrency{Key: j.ConcurrencyKey, Limit: j.ConcurrencyLimit, Group: j.ConcurrencyGroup}
	}
	if j.TimeoutMode == axtype.TimeoutAdaptive {
		out.AdaptiveTimeout = adaptiveTimeoutFromDB(j)
	}
	if len(out.Triggers) > 0 {
		out.Trigger = nil // a job shows one of the two, as it is given
	}
	return out, nil
}

// jobShardsFromDB shows how a stored job splits its runs: a generator
// shows without the range it does not use, so the job can be PUT back.
func jobShardsFromDB(j *axtype.Job) *JobShards {
	if g := j.ShardGenerator; g != nil {
		return &JobShards{Count: j.ShardCount, Generator: &JobShardGenerator{Kind: string(g.Kind), WindowSeconds: g.WindowSeconds}}
	}
	return &JobShards{Count: j.ShardCount, Params: j.ShardParams, Range: &ShardRange{From: j.ShardRangeFrom, To: j.ShardRangeTo}}
}

// adaptiveTimeoutFromDB shows the timeout a new task of adaptive job j
// gets, and why.
func adaptiveTimeoutFromDB(j *axtype.Job) *JobAdaptiveTimeout {
	m := j.TimeoutMeasure
	secs, basis := j.AdaptiveTimeout()
	out := &JobAdaptiveTimeout{TimeoutSeconds: secs, Basis: string(basis)}
	if m != nil {
		out.Samples, out.MeasuredAt = m.Samples, &m.ComputedAt
	}
	if basis == axtype.TimeoutBasisNoHistory {
		out.Explanation = fmt.Sprintf("no successful attempt measured yet: timeout_seconds, %d s, the start value", secs)
		return out
	}
	p95 := m.P95.Seconds()
	out.P95Seconds = &p95
	times := fmt.Sprintf("3 × P95 of %d successful attempts (3 × %s = %s)", m.Samples,
		seconds(m.P95), seconds(axtype.AdaptiveTimeoutFactor*m.P95))
	switch basis {
	case axtype.TimeoutBasisFloor:
		out.Explanation = fmt.Sprintf("%s is under the %d s floor: %d s", times, axtype.AdaptiveTimeoutMinSeconds, secs)
	case axtype.TimeoutBasisCeiling:
		out.Explanation = fmt.Sprintf("%s is over timeout_seconds, the ceiling: %d s", times, secs)
	default:
		out.Explanation = fmt.Sprintf("%s, rounded up: %d s", times, secs)
	}
	return out
}

// seconds writes d in seconds to the millisecond, without trailing zeros.
func seconds(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + " s"
}

// jobExecutorToDB is what an API executor stores. The API and the stored
// form differ by Kind (a column of its own) and method, which the schema's
// default fills for every kind and only http keeps.
func jobExecutorToDB(e *JobExecutor) axtype.ExecutorConfig {
	c := axtype.ExecutorConfig{Command: e.Command, URL: e.URL, Headers: e.Headers, Body: e.Body, Handler: e.Handler}
	if axtype.ExecutorKind(e.Kind) == axtype.ExecutorHTTP {
		c.Method = e.Method
	}
	return c
}

// jobExecutorFromDB shows a stored executor of kind (a job's, or a
// leased task's).
func jobExecutorFromDB(kind axtype.ExecutorKind, c *axtype.ExecutorConfig) JobExecutor {
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
