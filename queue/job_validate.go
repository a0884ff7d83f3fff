package queue

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/cron"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/httptask"
)

// The engine owns the rules of a job definition that types cannot state:
// fields that depend on each other, cron expressions, timezones, URLs and
// templates. JobService and DeclarationService refuse a job that breaks
// one, whoever sends it (API, CLI, declaration); the API checks the same
// rules while it decodes, so its problems name body fields.

var labelKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,100}$`)

// MaxTargetLabels and MaxLabelValueBytes bound a job's target labels as
// an agent's are bounded (an agent that matches carries the same). The
// values were unbounded: the metric of agents by pool takes its label
// values from the jobs' target pools, and one job could put 500 KB into
// every scrape of every replica.
const (
	MaxTargetLabels    = 100
	MaxLabelValueBytes = 255
)

// ValidateJob checks j, a definition with or without its defaults filled,
// and returns an *axtype.InvalidError naming every field that is wrong,
// or nil. It stores the timezone's canonical name in j (as Postgres reads
// it: "Europe//./Paris" is Europe/Paris). now is when run_at must follow.
func ValidateJob(j *axtype.Job, now time.Time) error {
	var v jobErrors
	if strings.TrimSpace(j.Name) == "" {
		v.add("name", "must not be blank", j.Name)
	}
	if j.Triggers != nil {
		v.triggers(j)
	} else {
		v.trigger(j, now)
	}
	v.executor(j)
	if len(j.TargetLabels) > MaxTargetLabels {
		v.add("target.labels", fmt.Sprintf("at most %d labels", MaxTargetLabels), len(j.TargetLabels))
	}
	for _, k := range slices.Sorted(maps.Keys(j.TargetLabels)) {
		switch value := j.TargetLabels[k]; {
		case !labelKeyPattern.MatchString(k):
			v.add("target.labels", "label keys are 1-100 of A-Z a-z 0-9 _ . - /", k)
		case len(value) > MaxLabelValueBytes:
			v.add("target.labels."+k, fmt.Sprintf("label values are at most %d bytes", MaxLabelValueBytes), len(value))
		}
	}
	v.route(j)
	v.concurrency(j)
	v.shardRange(j)
	v.shardGenerator(j)
	if j.ExecutorKind == axtype.ExecutorHTTP && j.Executor.Body != "" {
		if err := httptask.ParseBodyTemplate(j.Executor.Body); err != nil {
			v.add("executor.body", err.Error(), j.Executor.Body)
		}
	}
	if shards := max(j.ShardCount, 1); j.MisfirePolicy == axtype.MisfireFireAll && j.MisfireMaxFires*shards > axtype.MaxTasksPerBatch {
		v.add("misfire.max_fires", fmt.Sprintf("with %d shards a run, fire_all may catch up at most %d runs (%d tasks at once)",
			shards, max(axtype.MaxTasksPerBatch/shards, 1), axtype.MaxTasksPerBatch), j.MisfireMaxFires)
	}
	if count := max(j.ShardCount, 1); len(j.ShardParams) > 0 && len(j.ShardParams) != count {
		v.add("shards.params",
			fmt.Sprintf("has %d entries but shards.count is %d: give one param per shard or none", len(j.ShardParams), count),
			j.ShardParams)
	}
	if j.Triggers == nil && j.TriggerKind == axtype.TriggerInterval && j.IntervalSeconds > 0 && int64(j.JitterSeconds) >= j.IntervalSeconds {
		v.add("jitter_seconds", "must be less than trigger.interval_seconds: a jittered run must start before the next tick", j.JitterSeconds)
	}
	if j.ActiveFrom != nil && j.ActiveUntil != nil && !j.ActiveUntil.After(*j.ActiveFrom) {
		v.add("active_until", "must be after active_from", j.ActiveUntil)
	}
	if j.RetryBackoffMaxSeconds != 0 && j.RetryBackoffMaxSeconds < j.RetryBackoffSeconds {
		v.add("retry.backoff_max_seconds", "must not be less than retry.backoff_seconds", j.RetryBackoffMaxSeconds)
	}
	if j.Agentless() && j.TimeoutSeconds > axtype.MaxAgentlessTimeoutSeconds {
		v.add("timeout_seconds", fmt.Sprintf("must be at most %d for an HTTP job ax sends itself "+
			"(no target labels): its request holds a server worker; for longer work answer 202 and post the result "+
			"to the completion URL, or run it on an agent", axtype.MaxAgentlessTimeoutSeconds), j.TimeoutSeconds)
	}
	if j.TimeoutMode == axtype.TimeoutAdaptive && j.TimeoutSeconds != 0 && j.TimeoutSeconds < axtype.AdaptiveTimeoutMinSeconds {
		v.add("timeout_seconds", fmt.Sprintf("must be at least %d with timeout_mode adaptive: it is the "+
			"ceiling of a timeout that is at least %d s", axtype.AdaptiveTimeoutMinSeconds, axtype.AdaptiveTimeoutMinSeconds), j.TimeoutSeconds)
	}
	if j.CallbackURL != "" {
		if reason := HTTPURLProblem(j.CallbackURL); reason != "" {
			v.add("callback.url", reason, j.CallbackURL)
		}
	}
	if len(v) == 0 {
		return nil
	}
	return &axtype.InvalidError{Fields: v}
}

// jobErrors collects what is wrong with a definition.
type jobErrors []axtype.FieldError

func (v *jobErrors) add(field, message string, value any) {
	*v = append(*v, axtype.FieldError{Field: field, Message: message, Value: value})
}

func (v *jobErrors) trigger(j *axtype.Job, now time.Time) {
	at := func(f string) string { return "trigger." + f }
	v.zone(at, &j.Timezone)
	kind := j.TriggerKind
	onlyFor := func(field string, only axtype.TriggerKind, set bool) {
		if set && kind != only {
			v.add(at(field), "is only used with trigger kind "+string(only), nil)
		}
	}
	onlyFor("cron", axtype.TriggerCron, j.CronExpr != "")
	onlyFor("interval_seconds", axtype.TriggerInterval, j.IntervalSeconds != 0)
	onlyFor("run_at", axtype.TriggerDelay, j.RunAt != nil)
	onlyFor("upstream", axtype.TriggerAfter, len(j.AfterUpstream) > 0)
	onlyFor("mode", axtype.TriggerAfter, j.AfterMode != "")
	switch kind {
	case axtype.TriggerCron:
		v.cronExpr(at, j.CronExpr, j.Timezone)
	case axtype.TriggerInterval:
		v.interval(at, j.IntervalSeconds)
	case axtype.TriggerDelay:
		if j.RunAt == nil {
			v.add(at("run_at"), "is required with trigger kind delay", nil)
		} else if !j.RunAt.After(now) {
			v.add(at("run_at"), "must be in the future", j.RunAt)
		}
	case axtype.TriggerManual:
	case axtype.TriggerAfter:
		v.afterTrigger(j)
	default:
		v.add(at("kind"), "is required: one of cron, interval, delay, manual, after", string(kind))
	}
}

// afterTrigger checks the upstreams of an after trigger as written (that
// they name jobs and close no cycle is checked when the job is saved),
// and the templates of upstream results in its params, rendered at each
// fire: a bad one is refused now rather than found then.
func (v *jobErrors) afterTrigger(j *axtype.Job) {
	switch {
	case len(j.AfterUpstream) == 0:
		v.add("trigger.upstream", "is required with trigger kind after: at least one job", nil)
	case len(j.AfterUpstream) > axtype.MaxAfterUpstreams:
		v.add("trigger.upstream", fmt.Sprintf("holds at most %d jobs", axtype.MaxAfterUpstreams), len(j.AfterUpstream))
	}
	if j.AfterMode != axtype.AfterAll && j.AfterMode != axtype.AfterAny {
		v.add("trigger.mode", "must be all or any", string(j.AfterMode))
	}
	seen := map[string]bool{}
	for i, u := range j.AfterUpstream {
		field := fmt.Sprintf("trigger.upstream[%d]", i)
		if group, name, ok := strings.Cut(u.Job, "/"); !ok || group == "" || name == "" {
			v.add(field+".job", "must be group/name", u.Job)
		} else if seen[u.Job] {
			v.add(field+".job", "is listed twice", u.Job)
		}
		seen[u.Job] = true
		switch u.On {
		case axtype.AfterOnSuccess, axtype.AfterOnFailure, axtype.AfterOnCompletion:
		default:
			v.add(field+".on", "must be success, failure or completion", string(u.On))
		}
	}
	if where, err := CheckAfterParams(j.Params); err != nil {
		v.add("params"+where, err.Error(), nil)
	}
}

func (v *jobErrors) executor(j *axtype.Job) {
	at := func(f string) string { return "executor." + f }
	e, kind := &j.Executor, j.ExecutorKind
	onlyFor := func(field string, only axtype.ExecutorKind, set bool) {
		if set && kind != only {
			v.add(at(field), "is only used with executor kind "+string(only), nil)
		}
	}
	onlyFor("command", axtype.ExecutorShell, e.Command != "")
	onlyFor("url", axtype.ExecutorHTTP, e.URL != "")
	onlyFor("headers", axtype.ExecutorHTTP, len(e.Headers) > 0)
	onlyFor("body", axtype.ExecutorHTTP, e.Body != "")
	onlyFor("handler", axtype.ExecutorHandler, e.Handler != "")
	switch kind {
	case axtype.ExecutorShell:
		if strings.TrimSpace(e.Command) == "" {
			v.add(at("command"), "is required with executor kind shell", e.Command)
		}
	case axtype.ExecutorHTTP:
		if reason := HTTPURLProblem(e.URL); reason != "" {
			v.add(at("url"), reason, e.URL)
		}
	case axtype.ExecutorHandler:
		if e.Handler == "" {
			v.add(at("handler"), "is required with executor kind handler", nil)
		}
	default:
		v.add(at("kind"), "is required: one of shell, http, handler", string(kind))
	}
}

func (v *jobErrors) route(j *axtype.Job) {
	if (j.RouteStrategy == axtype.RouteConsistentHash || j.RouteStrategy == axtype.RouteLoadAware) && strings.TrimSpace(j.RouteKey) == "" {
		v.add("route.key", "is required with strategy "+string(j.RouteStrategy), j.RouteKey)
	}
	if j.RouteKey != "" {
		if err := dispatch.ParseRouteKey(j.RouteKey); err != nil {
			v.add("route.key", err.Error(), j.RouteKey)
		}
	}
	if j.RouteStrategy == axtype.RouteBroadcast && j.ShardCount > 1 {
		v.add("shards.count", "must be 1 with strategy broadcast: a run has one task per live agent", j.ShardCount)
	}
}

// shardRangeGiven reports whether j names a shard range of its own: one
// other than none ([0, 0), before defaults) or the default.
func shardRangeGiven(j *axtype.Job) bool {
	return j.ShardRangeFrom != 0 || (j.ShardRangeTo != 0 && j.ShardRangeTo != axtype.DefaultShardRangeTo)
}

// shardRange checks that each shard without a param gets a non-empty
// part of the range. The range may span all of int64: its width is
// computed without overflow.
func (v *jobErrors) shardRange(j *axtype.Job) {
	if !shardRangeGiven(j) {
		return
	}
	from, to := j.ShardRangeFrom, j.ShardRangeTo
	if from >= to {
		v.add("shards.range.to", "must be greater than shards.range.from", to)
		return
	}
	width := uint64(to) - uint64(from) // exact: to > from
	if count := max(j.ShardCount, 1); len(j.ShardParams) == 0 && width < uint64(count) {
		v.add("shards.range",
			fmt.Sprintf("spans %d values but shards.count is %d: each shard needs at least one", width, count),
			map[string]int64{"from": from, "to": to})
	}
}

// shardGenerator checks a shard generator against the settings it
// replaces: no params or range of its own, no broadcast (whose shards are
// agents), and a time window that splits into whole seconds.
func (v *jobErrors) shardGenerator(j *axtype.Job) {
	g := j.ShardGenerator
	if g == nil {
		return
	}
	at := func(f string) string { return "shards." + f }
	if len(j.ShardParams) > 0 {
		v.add(at("params"), "must be empty with shards.generator: the generator makes each shard's param", j.ShardParams)
	}
	if shardRangeGiven(j) {
		v.add(at("range"), "is not used with shards.generator", map[string]int64{"from": j.ShardRangeFrom, "to": j.ShardRangeTo})
	}
	if j.RouteStrategy == axtype.RouteBroadcast {
		v.add(at("generator"), "is not used with strategy broadcast: a run has one task per live agent", string(g.Kind))
	}
	switch g.Kind {
	case axtype.ShardTimeWindow:
		count := max(j.ShardCount, 1)
		switch {
		case g.WindowSeconds < 1 || g.WindowSeconds > axtype.MaxShardWindowSeconds:
			v.add(at("generator.window_seconds"),
				fmt.Sprintf("is required with kind time_window: 1 to %d (366 days)", axtype.MaxShardWindowSeconds), g.WindowSeconds)
		case g.WindowSeconds%count != 0:
			v.add(at("generator.window_seconds"),
				fmt.Sprintf("must be a multiple of shards.count (%d) so every window is a whole number of seconds", count),
				g.WindowSeconds)
		}
	case axtype.ShardMod:
		if g.WindowSeconds != 0 {
			v.add(at("generator.window_seconds"), "is only used with kind time_window", g.WindowSeconds)
		}
	default:
		v.add(at("generator.kind"), "is required: one of time_window, mod", string(g.Kind))
	}
}

// HTTPURLProblem says what is wrong with an outbound URL, or "".
func HTTPURLProblem(raw string) string {
	if raw == "" {
		return "is required"
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return "is not a valid URL"
	case u.Scheme != "http" && u.Scheme != "https":
		return "must be an absolute http or https URL"
	case u.Host == "" || u.Hostname() == "":
		return "must name a host"
	case u.User != nil:
		return "must not carry credentials; use headers"
	}
	return ""
}

// CronReason is what is wrong with a cron expression, without the
// expression (a *CronFieldError's reason).
func CronReason(err error) string {
	var fe *cron.FieldError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return err.Error()
}

// concurrency checks a job's concurrency key: a template that parses, on
// a job whose tasks agents lease (the limit is kept in the lease).
func (v *jobErrors) concurrency(j *axtype.Job) {
	if j.ConcurrencyKey == "" && j.ConcurrencyLimit == 0 && j.ConcurrencyGroup == "" {
		return
	}
	if strings.TrimSpace(j.ConcurrencyKey) == "" {
		v.add("concurrency.key", "must not be blank", j.ConcurrencyKey)
	} else if err := dispatch.ParseConcurrencyKey(j.ConcurrencyKey); err != nil {
		v.add("concurrency.key", err.Error(), j.ConcurrencyKey)
	}
	if j.ConcurrencyLimit < 1 {
		v.add("concurrency.limit", "must be at least 1", j.ConcurrencyLimit)
	}
	if j.Agentless() {
		v.add("concurrency", "applies to tasks agents lease: an HTTP job ax sends itself "+
			"(no target labels) has no concurrency key; give it target labels, or use a rate limit class", j.ConcurrencyKey)
	}
}
