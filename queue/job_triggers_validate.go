package queue

import (
	"errors"
	"fmt"
	"slices"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/cron"
)

// ValidateTriggers checks a list of triggers as a preview reads it (a
// job's holds two or more): 1 to axtype.MaxTriggers, each a cron or an
// interval that parses, none twice. It returns an *axtype.InvalidError whose fields are named
// triggers[i].…, or nil, and stores each timezone's canonical name.
func ValidateTriggers(ts []axtype.TriggerSpec) error {
	var v jobErrors
	if len(ts) == 0 {
		v.add("triggers", "must list at least one trigger", 0)
	}
	v.triggerList(ts)
	if len(v) == 0 {
		return nil
	}
	return &axtype.InvalidError{Fields: v}
}

// triggers checks a job with a list of triggers: the list itself, each
// interval longer than the jitter, and the job's trigger fields, which
// hold the first of the list (set from it when left empty; the trigger
// fields' timezone is then replaced, as a default may have filled it).
func (v *jobErrors) triggers(j *axtype.Job) {
	if len(j.Triggers) < 2 {
		v.add("triggers", "must list at least two triggers (a job with one has it as its trigger)", len(j.Triggers))
		return
	}
	before := len(*v)
	v.triggerList(j.Triggers)
	if len(*v) > before {
		return
	}
	first := j.Triggers[0]
	zone, _ := cron.CanonicalZone(j.Timezone)
	given := j.TriggerKind != "" || j.CronExpr != "" || j.IntervalSeconds != 0 // a timezone alone may be a default
	if given && (j.TriggerKind != first.Kind || j.CronExpr != first.CronExpr || j.IntervalSeconds != first.IntervalSeconds || zone != first.Timezone) {
		v.add("trigger", "must be left empty or be the first of triggers: a job with several triggers holds the first in its trigger fields", nil)
		return
	}
	if j.RunAt != nil || len(j.AfterUpstream) > 0 || j.AfterMode != "" {
		v.add("trigger", "has no run_at, upstream or mode in a job with several triggers (each is cron or interval)", nil)
		return
	}
	j.TriggerKind, j.CronExpr, j.Timezone, j.IntervalSeconds = first.Kind, first.CronExpr, first.Timezone, first.IntervalSeconds
	for i, t := range j.Triggers {
		if t.Kind == axtype.TriggerInterval && int64(j.JitterSeconds) >= t.IntervalSeconds {
			v.add("jitter_seconds", fmt.Sprintf("must be less than triggers[%d].interval_seconds: a jittered run must start before the next tick", i), j.JitterSeconds)
			return
		}
	}
}

// triggerList checks the triggers of a list; see ValidateTriggers.
func (v *jobErrors) triggerList(ts []axtype.TriggerSpec) {
	if len(ts) > axtype.MaxTriggers {
		v.add("triggers", fmt.Sprintf("lists %d triggers; at most %d", len(ts), axtype.MaxTriggers), len(ts))
		return
	}
	for i := range ts {
		path := fmt.Sprintf("triggers[%d]", i)
		before := len(*v)
		v.listedTrigger(path, &ts[i])
		if len(*v) > before {
			continue
		}
		if k := slices.Index(ts[:i], ts[i]); k >= 0 {
			v.add(path, fmt.Sprintf("is the same as triggers[%d]", k), nil)
		}
	}
}

// listedTrigger checks t, the trigger of a list at path (triggers[1]).
func (v *jobErrors) listedTrigger(path string, t *axtype.TriggerSpec) {
	at := func(f string) string { return path + "." + f }
	v.zone(at, &t.Timezone)
	switch t.Kind {
	case axtype.TriggerCron:
		if t.IntervalSeconds != 0 {
			v.add(at("interval_seconds"), "is only used with trigger kind interval", nil)
		}
		v.cronExpr(at, t.CronExpr, t.Timezone)
	case axtype.TriggerInterval:
		if t.CronExpr != "" {
			v.add(at("cron"), "is only used with trigger kind cron", nil)
		}
		v.interval(at, t.IntervalSeconds)
	default:
		v.add(at("kind"), "must be cron or interval in a list of triggers (a delay or manual job has one trigger)", string(t.Kind))
	}
}

// The checks a trigger of the job's fields and one of a list share; at
// names a field under the trigger ("trigger.cron", "triggers[1].cron").

// zone checks a trigger's timezone and stores its canonical name (as
// Postgres reads it: "Europe//./Paris" is Europe/Paris).
func (v *jobErrors) zone(at func(string) string, zone *string) {
	if canon, err := cron.CanonicalZone(*zone); err != nil {
		v.add(at("timezone"), err.Error(), *zone)
	} else {
		*zone = canon
	}
}

// cronExpr checks the expression of a cron trigger in zone.
func (v *jobErrors) cronExpr(at func(string) string, expr, zone string) {
	if expr == "" {
		v.add(at("cron"), "is required with trigger kind cron", nil)
	} else if _, err := cron.Parse(expr, zone); err != nil {
		var fe *cron.FieldError
		if !errors.As(err, &fe) || fe.Field != "timezone" { // a bad zone is named by zone
			v.add(at("cron"), CronReason(err), expr)
		}
	}
}

// interval checks the period of an interval trigger.
func (v *jobErrors) interval(at func(string) string, seconds int64) {
	if seconds < 1 {
		v.add(at("interval_seconds"), "is required with trigger kind interval and must be at least 1", seconds)
	}
}
