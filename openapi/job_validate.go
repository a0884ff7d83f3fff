package openapi

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
)

var labelKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.\-/]{1,100}$`)

// Resolve checks what struct tags cannot: fields that depend on each
// other, cron expressions, timezones and URLs. Huma calls it after
// decoding, so every error names its field (body.trigger.cron…).
func (j *Job) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	if strings.TrimSpace(j.Name) == "" {
		errs.add(prefix.With("name"), "must not be blank", j.Name)
	}
	j.Params.validate(prefix.With("params"), &errs)
	j.Trigger.validate(prefix, &errs)
	j.Executor.validate(prefix, &errs)
	if j.Target != nil {
		for k := range j.Target.Labels {
			if !labelKeyPattern.MatchString(k) {
				errs.add(prefix.With("target.labels"), "label keys are 1-100 of A-Z a-z 0-9 _ . - /", k)
			}
		}
	}
	if j.Route != nil && (axtype.RouteStrategy(j.Route.Strategy) == axtype.RouteConsistentHash || axtype.RouteStrategy(j.Route.Strategy) == axtype.RouteLoadAware) &&
		strings.TrimSpace(j.Route.Key) == "" {
		errs.add(prefix.With("route.key"), "is required with strategy "+j.Route.Strategy, j.Route.Key)
	}
	if j.Route != nil && j.Route.Key != "" {
		if err := queue.ParseRouteKey(j.Route.Key); err != nil {
			errs.add(prefix.With("route.key"), err.Error(), j.Route.Key)
		}
	}
	if j.Route != nil && axtype.RouteStrategy(j.Route.Strategy) == axtype.RouteBroadcast && j.Shards != nil && j.Shards.Count > 1 {
		errs.add(prefix.With("shards.count"), "must be 1 with strategy broadcast: a run has one task per live agent", j.Shards.Count)
	}
	if c := j.Concurrency; c != nil {
		if strings.TrimSpace(c.Key) == "" {
			errs.add(prefix.With("concurrency.key"), "must not be blank", c.Key)
		} else if err := queue.ParseConcurrencyKey(c.Key); err != nil {
			errs.add(prefix.With("concurrency.key"), err.Error(), c.Key)
		}
		if agentlessHTTP(j) {
			errs.add(prefix.With("concurrency"), "applies to tasks agents lease: an HTTP job ax sends itself "+
				"(no target labels) has no concurrency key; give it target labels, or use a rate limit class", c.Key)
		}
	}
	j.Shards.validateRange(prefix, &errs)
	j.Shards.validateGenerator(prefix, j.Route, &errs)
	if axtype.ExecutorKind(j.Executor.Kind) == axtype.ExecutorHTTP && j.Executor.Body != "" {
		if err := httptask.ParseBodyTemplate(j.Executor.Body); err != nil {
			errs.add(prefix.With("executor.body"), err.Error(), j.Executor.Body)
		}
	}
	if j.Shards != nil && len(j.Shards.Params) > 0 && len(j.Shards.Params) != max(j.Shards.Count, 1) {
		errs.add(prefix.With("shards.params"),
			fmt.Sprintf("has %d entries but shards.count is %d: give one param per shard or none", len(j.Shards.Params), max(j.Shards.Count, 1)),
			j.Shards.Params)
	}
	if j.Trigger.Kind == string(axtype.TriggerInterval) && j.Trigger.IntervalSeconds > 0 && int64(j.JitterSeconds) >= j.Trigger.IntervalSeconds {
		errs.add(prefix.With("jitter_seconds"), "must be less than trigger.interval_seconds: a jittered run must start before the next tick", j.JitterSeconds)
	}
	if j.ActiveFrom != nil && j.ActiveUntil != nil && !j.ActiveUntil.After(*j.ActiveFrom) {
		errs.add(prefix.With("active_until"), "must be after active_from", j.ActiveUntil)
	}
	if j.Retry != nil && j.Retry.BackoffMaxSeconds != 0 && j.Retry.BackoffMaxSeconds < j.Retry.BackoffSeconds {
		errs.add(prefix.With("retry.backoff_max_seconds"), "must not be less than retry.backoff_seconds", j.Retry.BackoffMaxSeconds)
	}
	if agentlessHTTP(j) && j.TimeoutSeconds > axtype.MaxAgentlessTimeoutSeconds {
		errs.add(prefix.With("timeout_seconds"), fmt.Sprintf("must be at most %d for an HTTP job ax sends itself "+
			"(no target labels): its request holds a server worker; for longer work answer 202 and post the result "+
			"to the completion URL, or run it on an agent", axtype.MaxAgentlessTimeoutSeconds), j.TimeoutSeconds)
	}
	if axtype.TimeoutMode(j.TimeoutMode) == axtype.TimeoutAdaptive && j.TimeoutSeconds != 0 && j.TimeoutSeconds < axtype.AdaptiveTimeoutMinSeconds {
		errs.add(prefix.With("timeout_seconds"), fmt.Sprintf("must be at least %d with timeout_mode adaptive: it is the "+
			"ceiling of a timeout that is at least %d s", axtype.AdaptiveTimeoutMinSeconds, axtype.AdaptiveTimeoutMinSeconds), j.TimeoutSeconds)
	}
	if j.Callback != nil {
		if reason := httpURLProblem(j.Callback.URL); reason != "" {
			errs.add(prefix.With("callback.url"), reason, j.Callback.URL)
		}
	}
	return errs
}

// validateRange checks that each shard without a param gets a non-empty
// part of the range. The range may span all of int64: its width is
// computed without overflow.
func (s *JobShards) validateRange(prefix *huma.PathBuffer, errs *fieldErrors) {
	if s == nil || s.Range == nil {
		return
	}
	r := s.Range
	if r.From >= r.To {
		errs.add(prefix.With("shards.range.to"), "must be greater than shards.range.from", r.To)
		return
	}
	width := uint64(r.To) - uint64(r.From) // exact: To > From
	if count := max(s.Count, 1); len(s.Params) == 0 && width < uint64(count) {
		errs.add(prefix.With("shards.range"),
			fmt.Sprintf("spans %d values but shards.count is %d: each shard needs at least one", width, count), r)
	}
}

// validateGenerator checks a shard generator against the settings it
// replaces: no params or range of its own, no broadcast (whose shards are
// agents), and a time window that splits into whole seconds.
func (s *JobShards) validateGenerator(prefix *huma.PathBuffer, route *JobRoute, errs *fieldErrors) {
	if s == nil || s.Generator == nil {
		return
	}
	g := s.Generator
	at := func(f string) string { return prefix.With("shards." + f) }
	if len(s.Params) > 0 {
		errs.add(at("params"), "must be empty with shards.generator: the generator makes each shard's param", s.Params)
	}
	if s.Range != nil {
		errs.add(at("range"), "is not used with shards.generator", s.Range)
	}
	if route != nil && axtype.RouteStrategy(route.Strategy) == axtype.RouteBroadcast {
		errs.add(at("generator"), "is not used with strategy broadcast: a run has one task per live agent", g.Kind)
	}
	switch kind := axtype.ShardGeneratorKind(g.Kind); kind {
	case axtype.ShardTimeWindow:
		count := max(s.Count, 1)
		switch {
		case g.WindowSeconds < 1 || g.WindowSeconds > axtype.MaxShardWindowSeconds:
			errs.add(at("generator.window_seconds"),
				fmt.Sprintf("is required with kind time_window: 1 to %d (366 days)", axtype.MaxShardWindowSeconds), g.WindowSeconds)
		case g.WindowSeconds%count != 0:
			errs.add(at("generator.window_seconds"),
				fmt.Sprintf("must be a multiple of shards.count (%d) so every window is a whole number of seconds", count),
				g.WindowSeconds)
		}
	case axtype.ShardMod:
		if g.WindowSeconds != 0 {
			errs.add(at("generator.window_seconds"), "is only used with kind time_window", g.WindowSeconds)
		}
	default: // see JobTrigger.validate
		errs.add(at("generator.kind"), "is required: one of time_window, mod", g.Kind)
	}
}

func (t *JobTrigger) validate(prefix *huma.PathBuffer, errs *fieldErrors) {
	at := func(f string) string { return prefix.With("trigger." + f) }
	if canon, err := queue.CanonicalZone(t.Timezone); err != nil {
		errs.add(at("timezone"), err.Error(), t.Timezone)
	} else {
		t.Timezone = canon // stored as Postgres reads it: "Europe//./Paris" is Europe/Paris
	}
	kind := axtype.TriggerKind(t.Kind)
	onlyFor := func(field string, only axtype.TriggerKind, set bool) {
		if set && kind != only {
			errs.add(at(field), "is only used with trigger kind "+string(only), nil)
		}
	}
	onlyFor("cron", axtype.TriggerCron, t.Cron != "")
	onlyFor("interval_seconds", axtype.TriggerInterval, t.IntervalSeconds != 0)
	onlyFor("run_at", axtype.TriggerDelay, t.RunAt != nil)
	switch kind {
	case axtype.TriggerCron:
		if t.Cron == "" {
			errs.add(at("cron"), "is required with trigger kind cron", nil)
		} else if _, err := queue.ParseCron(t.Cron, t.Timezone); err != nil {
			var fe *queue.CronFieldError
			if !errors.As(err, &fe) || fe.Field != "timezone" {
				errs.add(at("cron"), cronReason(err), t.Cron)
			}
		}
	case axtype.TriggerInterval:
		if t.IntervalSeconds < 1 {
			errs.add(at("interval_seconds"), "is required with trigger kind interval and must be at least 1", t.IntervalSeconds)
		}
	case axtype.TriggerDelay:
		if t.RunAt == nil {
			errs.add(at("run_at"), "is required with trigger kind delay", nil)
		} else if !t.RunAt.After(time.Now()) {
			errs.add(at("run_at"), "must be in the future", t.RunAt)
		}
	case axtype.TriggerManual:
	default:
		// The schema check matches keys regardless of case and the decoder
		// does not ({"Trigger": …}): check what was decoded.
		errs.add(at("kind"), "is required: one of cron, interval, delay, manual", t.Kind)
	}
}

func (e *JobExecutor) validate(prefix *huma.PathBuffer, errs *fieldErrors) {
	at := func(f string) string { return prefix.With("executor." + f) }
	kind := axtype.ExecutorKind(e.Kind)
	onlyFor := func(field string, only axtype.ExecutorKind, set bool) {
		if set && kind != only {
			errs.add(at(field), "is only used with executor kind "+string(only), nil)
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
			errs.add(at("command"), "is required with executor kind shell", e.Command)
		}
	case axtype.ExecutorHTTP:
		if reason := httpURLProblem(e.URL); reason != "" {
			errs.add(at("url"), reason, e.URL)
		}
	case axtype.ExecutorHandler:
		if e.Handler == "" {
			errs.add(at("handler"), "is required with executor kind handler", nil)
		}
	default: // see JobTrigger.validate
		errs.add(at("kind"), "is required: one of shell, http, handler", e.Kind)
	}
}

// httpURLProblem says what is wrong with an outbound URL, or "".
func httpURLProblem(raw string) string {
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

func cronReason(err error) string {
	var fe *queue.CronFieldError
	if errors.As(err, &fe) {
		return fe.Reason
	}
	return err.Error()
}

// fieldErrors collects validation errors in Huma's form.
type fieldErrors []error

func (e *fieldErrors) add(location, message string, value any) {
	*e = append(*e, &huma.ErrorDetail{Location: location, Message: message, Value: value})
}
