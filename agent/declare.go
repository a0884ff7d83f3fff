package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// JobSpec declares a job that runs one of the program's handlers, next to
// it. The agent declares Config.Jobs once it has registered, all in one
// call (POST /v1/declarations): jobs are created or updated to match, the
// set's jobs no longer declared are paused (never deleted), and the API
// refuses to edit them unless forced. The server validates each job as
// POST /v1/jobs does; what it refuses is logged with the field.
type JobSpec struct {
	// Name is the job's name, unique in its group. Required.
	Name string
	// Group defaults to the server's ("default").
	Group       string
	Owner       string
	Description string
	// Handler is the handler the job runs. Defaults to Name.
	Handler string

	// The trigger: Cron (with Timezone, default UTC), Every (whole
	// seconds) or At (once); none of them: the job fires only when
	// triggered through the API.
	Cron     string
	Timezone string
	Every    time.Duration
	At       time.Time

	// Shards splits each run into that many tasks (default 1), each with
	// its ShardParams entry, or its part of ShardRange.
	Shards      int
	ShardParams []string
	ShardRange  *ShardRange
	// Timeout limits one attempt of one task (whole seconds). Zero: the
	// server's default, an hour.
	Timeout time.Duration
	// Retry overrides the server's retry policy (3 retries from 5 s).
	Retry *RetryPolicy
	// Priority orders leasing, -1000..1000 (higher first).
	Priority int
	// Route is the routing strategy (round_robin, consistent_hash…) and
	// RouteKey its key template; empty: the server's default.
	Route    string
	RouteKey string
	// RateClass is the token bucket class that caps the job's lease rate.
	RateClass string
	// Callback is a URL that receives a signed POST when a run ends.
	Callback string
	// CallbackOrdered delivers the job's callbacks in their sequence order
	// (the next waits until the one before is delivered or has failed for
	// good). Needs Callback.
	CallbackOrdered bool
	// Labels are the labels an agent needs to run the job. Nil: this
	// agent's labels (Config.Labels), so the job runs on agents like it.
	Labels map[string]string
	// Params are handed to every run: a JSON object.
	Params json.RawMessage
	// Concurrency is what a fire does while the previous run is
	// unfinished: allow (default), forbid, replace or queue.
	Concurrency string
}

// ShardRange is a half-open range [From, To) split among shards.
type ShardRange struct{ From, To int64 }

// RetryPolicy says how failed tasks are retried: MaxAttempts counts the
// first; Backoff doubles each retry up to MaxBackoff (whole seconds).
type RetryPolicy struct {
	MaxAttempts         int
	Backoff, MaxBackoff time.Duration
}

// Declaration is a set of jobs declared together, as the server takes it.
type Declaration struct {
	ManagedBy string            `json:"managed_by"`
	Version   string            `json:"version,omitempty"`
	Source    string            `json:"source,omitempty"`
	Jobs      []json.RawMessage `json:"jobs"`
	Prune     bool              `json:"prune"`
	// Adopt: a program's jobs are its code's, so it takes over jobs of
	// the same names made by hand.
	Adopt bool `json:"adopt"`
}

// DeclarationReport is what a declaration did, job by job.
type DeclarationReport struct {
	ManagedBy string         `json:"managed_by"`
	Version   string         `json:"version"`
	Changed   bool           `json:"changed"`
	Counts    map[string]int `json:"counts"`
	Jobs      []DeclaredJob  `json:"jobs"`
}

// DeclaredJob is what a declaration did to one job.
type DeclaredJob struct {
	ID      string   `json:"id"`
	Group   string   `json:"group"`
	Name    string   `json:"name"`
	Action  string   `json:"action"`
	Changes []string `json:"changes"`
	Reason  string   `json:"reason"`
}

// Declarer is a Server that can declare jobs; ClientServer is one. Key is
// an API key with scope submit.
type Declarer interface {
	Declare(ctx context.Context, key string, d Declaration) (DeclarationReport, error)
}

// defaultJobSet names a program's declaration set: sdk:<executable>, the
// same on every machine that runs the program.
func defaultJobSet() string {
	name := filepath.Base(os.Args[0])
	if exe, err := os.Executable(); err == nil {
		name = filepath.Base(exe)
	}
	return "sdk:" + cmp.Or(name, "agent")
}

// checkJobs reports what is wrong with the declared jobs before any call:
// names, and durations the API takes in whole seconds.
func checkJobs(jobs []JobSpec) error {
	var errs []error
	seen := map[[2]string]bool{}
	for i, j := range jobs {
		if strings.TrimSpace(j.Name) == "" {
			errs = append(errs, fmt.Errorf("jobs[%d]: no name", i))
		}
		key := [2]string{cmp.Or(j.Group, "default"), j.Name}
		if seen[key] {
			errs = append(errs, fmt.Errorf("jobs[%d]: %s/%s declared twice", i, key[0], key[1]))
		}
		seen[key] = true
		triggers := 0
		for _, set := range []bool{j.Cron != "", j.Every != 0, !j.At.IsZero()} {
			if set {
				triggers++
			}
		}
		if triggers > 1 {
			errs = append(errs, fmt.Errorf("jobs[%d] (%s): give one of Cron, Every, At", i, j.Name))
		}
		for _, d := range []time.Duration{j.Every, j.Timeout} {
			if d < 0 || d%time.Second != 0 {
				errs = append(errs, fmt.Errorf("jobs[%d] (%s): durations are whole seconds, not %s", i, j.Name, d))
			}
		}
	}
	return errors.Join(errs...)
}

// wireJob is a JobSpec as the job API takes it.
func (j JobSpec) wireJob(agentLabels map[string]string) (json.RawMessage, error) {
	out := map[string]any{"name": j.Name, "executor": map[string]any{"kind": KindHandler, "handler": cmp.Or(j.Handler, j.Name)}}
	putString(out, "group", j.Group)
	putString(out, "owner", j.Owner)
	putString(out, "description", j.Description)
	switch {
	case j.Cron != "":
		out["trigger"] = map[string]any{"kind": "cron", "cron": j.Cron, "timezone": cmp.Or(j.Timezone, "UTC")}
	case j.Every != 0:
		out["trigger"] = map[string]any{"kind": "interval", "interval_seconds": seconds(j.Every)}
	case !j.At.IsZero():
		out["trigger"] = map[string]any{"kind": "delay", "run_at": j.At.UTC().Format(time.RFC3339Nano)}
	default:
		out["trigger"] = map[string]any{"kind": "manual"}
	}
	if j.Shards != 0 || len(j.ShardParams) > 0 || j.ShardRange != nil {
		shards := map[string]any{"count": max(j.Shards, 1)}
		if len(j.ShardParams) > 0 {
			shards["params"] = j.ShardParams
		}
		if r := j.ShardRange; r != nil {
			shards["range"] = map[string]any{"from": r.From, "to": r.To}
		}
		out["shards"] = shards
	}
	if j.Timeout != 0 {
		out["timeout_seconds"] = seconds(j.Timeout)
	}
	if r := j.Retry; r != nil {
		retry := map[string]any{}
		putInt(retry, "max_attempts", int64(r.MaxAttempts))
		putInt(retry, "backoff_seconds", seconds(r.Backoff))
		putInt(retry, "backoff_max_seconds", seconds(r.MaxBackoff))
		out["retry"] = retry
	}
	putInt(out, "priority", int64(j.Priority))
	if j.Route != "" || j.RouteKey != "" {
		route := map[string]any{}
		putString(route, "strategy", j.Route)
		putString(route, "key", j.RouteKey)
		out["route"] = route
	}
	putString(out, "rate_limit_class", j.RateClass)
	putString(out, "concurrency_policy", j.Concurrency)
	if j.Callback != "" {
		cb := map[string]any{"url": j.Callback}
		if j.CallbackOrdered {
			cb["ordered"] = true
		}
		out["callback"] = cb
	}
	labels := j.Labels
	if labels == nil {
		labels = agentLabels
	}
	if len(labels) > 0 {
		out["target"] = map[string]any{"labels": labels}
	}
	if len(j.Params) > 0 {
		out["params"] = j.Params
	}
	return json.Marshal(out)
}

func seconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

func putString(m map[string]any, k, v string) {
	if v != "" {
		m[k] = v
	}
}

func putInt(m map[string]any, k string, v int64) {
	if v != 0 {
		m[k] = v
	}
}

// declaration builds the agent's declaration of Config.Jobs: set
// Config.JobSet at Config.Version, from this program on this host, pruned.
func (a *Agent) declaration() (Declaration, error) {
	d := Declaration{ManagedBy: a.cfg.JobSet, Version: a.cfg.Version, Prune: true, Adopt: true,
		Source: fmt.Sprintf("%s on %s", strings.TrimPrefix(a.cfg.JobSet, "sdk:"), a.cfg.HostName)}
	for i, j := range a.cfg.Jobs {
		raw, err := j.wireJob(a.cfg.Labels)
		if err != nil {
			return d, fmt.Errorf("jobs[%d]: %w", i, err)
		}
		d.Jobs = append(d.Jobs, raw)
	}
	return d, nil
}

// declareJobs declares Config.Jobs, retrying while the server is away,
// and logs what changed. A refusal (a newer version of the set applied,
// an invalid job) is logged and not retried: the agent goes on running
// tasks either way.
func (a *Agent) declareJobs(ctx context.Context) {
	d, err := a.declaration()
	if err != nil {
		a.log.ErrorContext(ctx, "error declaring jobs", "error", err)
		return
	}
	declarer := a.server.(Declarer) // checked by New
	var report DeclarationReport
	err = a.retry(ctx, "declare", func(ctx context.Context) error {
		var err error
		report, err = declarer.Declare(ctx, cmp.Or(a.cfg.DeclareKey, a.cfg.Key), d)
		return err
	})
	var se *StatusError
	switch {
	case err != nil && ctx.Err() != nil:
		return
	case errors.As(err, &se) && se.Code == http.StatusForbidden:
		a.log.ErrorContext(ctx, "jobs not declared: the declaration set belongs to other job groups than the key's",
			"managed_by", d.ManagedBy, "version", d.Version, "error", err,
			"hint", "declare with a key of all the set's groups (Config.DeclareKey) or name another set (Config.JobSet)")
		return
	case err != nil:
		a.log.ErrorContext(ctx, "jobs not declared", "managed_by", d.ManagedBy, "version", d.Version, "error", err)
		return
	}
	for _, j := range report.Jobs {
		if j.Action != "unchanged" {
			a.log.InfoContext(ctx, "declared job "+j.Action, "job_id", j.ID, "group", j.Group, "name", j.Name,
				"changes", j.Changes, "reason", j.Reason)
		}
	}
	a.log.InfoContext(ctx, "jobs declared", "managed_by", report.ManagedBy, "version", report.Version,
		"changed", report.Changed, "counts", report.Counts)
}
