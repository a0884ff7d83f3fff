package openapi

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/ax-scheduler/ax/queue"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// validateTriggers checks a job's trigger or triggers (exactly one of the
// two) and makes a list of one its trigger, so such a job is stored and
// shown as any job with one trigger. It says whether the rest of the job
// can be checked (there is a trigger to read). A single trigger is the
// engine's to check (queue.ValidateJob); each of a list is checked here,
// since the engine's job holds the first in its trigger columns.
func (j *Job) validateTriggers(prefix *huma.PathBuffer, errs *fieldErrors) bool {
	switch {
	case j.Trigger != nil && j.Triggers != nil:
		errs.add(fieldAt(prefix, "triggers"), "give trigger or triggers, not both (a PATCH that sets one sets the other to null)", nil)
		return false
	case j.Trigger == nil && j.Triggers == nil:
		errs.add(fieldAt(prefix, "trigger"), "is required (or triggers, a list of several)", nil)
		return false
	case j.Trigger != nil:
		return true
	case len(j.Triggers) == 0:
		errs.add(fieldAt(prefix, "triggers"), "must list at least one trigger", nil)
		return false
	case len(j.Triggers) > axtype.MaxTriggers: // the schema says so too
		errs.add(fieldAt(prefix, "triggers"), fmt.Sprintf("lists %d triggers; at most %d", len(j.Triggers), axtype.MaxTriggers), nil)
		return false
	case len(j.Triggers) == 1:
		j.Trigger, j.Triggers = &j.Triggers[0], nil
		return true
	}
	before := len(*errs)
	validateTriggerList(fieldAt(prefix, "triggers"), j.Triggers, errs)
	for i, t := range j.Triggers {
		if len(*errs) == before && t.Kind == string(axtype.TriggerInterval) && int64(j.JitterSeconds) >= t.IntervalSeconds {
			errs.add(fieldAt(prefix, "jitter_seconds"), fmt.Sprintf("must be less than triggers[%d].interval_seconds: a jittered run must start before the next tick", i), j.JitterSeconds)
		}
	}
	return len(*errs) == before
}

// validate checks t, a trigger of a list at path (body.triggers[1]).
func (t *JobTrigger) validate(path string, errs *fieldErrors) {
	at := func(f string) string { return path + "." + f }
	if canon, err := queue.CanonicalZone(t.Timezone); err != nil {
		errs.add(at("timezone"), err.Error(), t.Timezone)
	} else {
		t.Timezone = canon // stored as Postgres reads it: "Europe//./Paris" is Europe/Paris
	}
	kind := axtype.TriggerKind(t.Kind)
	if t.Cron != "" && kind != axtype.TriggerCron {
		errs.add(at("cron"), "is only used with trigger kind cron", nil)
	}
	if t.IntervalSeconds != 0 && kind != axtype.TriggerInterval {
		errs.add(at("interval_seconds"), "is only used with trigger kind interval", nil)
	}
	if t.RunAt != nil && kind != axtype.TriggerDelay {
		errs.add(at("run_at"), "is only used with trigger kind delay", nil)
	}
	switch kind {
	case axtype.TriggerCron:
		if t.Cron == "" {
			errs.add(at("cron"), "is required with trigger kind cron", nil)
		} else if _, err := queue.ParseCron(t.Cron, t.Timezone); err != nil {
			var fe *queue.CronFieldError
			if !errors.As(err, &fe) || fe.Field != "timezone" { // a bad zone is named above
				errs.add(at("cron"), queue.CronReason(err), t.Cron)
			}
		}
	case axtype.TriggerInterval:
		if t.IntervalSeconds < 1 {
			errs.add(at("interval_seconds"), "is required with trigger kind interval and must be at least 1", t.IntervalSeconds)
		}
	}
}

// validateTriggerList checks the triggers of a list at path
// (body.triggers): each valid, cron or interval, none twice.
func validateTriggerList(path string, ts []JobTrigger, errs *fieldErrors) {
	for i := range ts {
		t := &ts[i]
		at := fmt.Sprintf("%s[%d]", path, i)
		before := len(*errs)
		t.validate(at, errs)
		if len(*errs) > before {
			continue
		}
		switch axtype.TriggerKind(t.Kind) {
		case axtype.TriggerCron, axtype.TriggerInterval:
		default:
			errs.add(at+".kind", "must be cron or interval in a list of triggers (a delay or manual job has one trigger)", t.Kind)
			continue
		}
		if k := slices.IndexFunc(ts[:i], func(o JobTrigger) bool { return sameTrigger(&o, t) }); k >= 0 {
			errs.add(at, fmt.Sprintf("is the same as %s[%d]", path, k), nil)
		}
	}
}

func sameTrigger(a, b *JobTrigger) bool {
	return a.Kind == b.Kind && a.Cron == b.Cron && a.Timezone == b.Timezone && a.IntervalSeconds == b.IntervalSeconds
}

// triggerSpecs is a job's list of triggers as the engine keeps it; nil
// for a job with one trigger.
func triggerSpecs(ts []JobTrigger) []axtype.TriggerSpec {
	if len(ts) < 2 {
		return nil
	}
	out := make([]axtype.TriggerSpec, len(ts))
	for i, t := range ts {
		out[i] = axtype.TriggerSpec{Kind: axtype.TriggerKind(t.Kind), CronExpr: t.Cron, Timezone: t.Timezone, IntervalSeconds: t.IntervalSeconds}
	}
	return out
}

func jobTriggersFromDB(specs []axtype.TriggerSpec) []JobTrigger {
	if len(specs) == 0 {
		return nil
	}
	out := make([]JobTrigger, len(specs))
	for i, s := range specs {
		out[i] = JobTrigger{Kind: string(s.Kind), Cron: s.CronExpr, Timezone: s.Timezone, IntervalSeconds: s.IntervalSeconds}
	}
	return out
}

// previewTriggers answers a cron preview of a list of triggers: their
// merged fires, each naming the triggers that tick then.
func previewTriggers(in *cronPreviewInput) (*cronPreviewOutput, error) {
	var errs fieldErrors
	switch {
	case in.Body.Cron != "" && in.Body.Triggers != nil:
		errs.add("body.triggers", "give cron or triggers, not both", nil)
	case len(in.Body.Triggers) == 0:
		errs.add("body.cron", "is required (or triggers, a non-empty list)", nil)
	default:
		validateTriggerList("body.triggers", in.Body.Triggers, &errs)
	}
	if len(errs) > 0 {
		return nil, huma.Error422UnprocessableEntity("invalid triggers", errs...)
	}
	jobID, err := previewJitterJob(&in.Body)
	if err != nil {
		return nil, err
	}
	after := time.Now().UTC()
	if in.Body.After != nil {
		after = *in.Body.After
	}
	specs := make([]axtype.TriggerSpec, len(in.Body.Triggers))
	for i, t := range in.Body.Triggers {
		specs[i] = axtype.TriggerSpec{Kind: axtype.TriggerKind(t.Kind), CronExpr: t.Cron, Timezone: t.Timezone, IntervalSeconds: t.IntervalSeconds}
	}
	next, by, err := queue.ListFires(specs, after, in.Body.Count)
	if err != nil {
		return nil, huma.Error422UnprocessableEntity("invalid triggers", &huma.ErrorDetail{Location: "body.triggers", Message: err.Error()})
	}
	tz := cmp.Or(in.Body.Triggers[0].Timezone, "UTC")
	loc, err := time.LoadLocation(tz)
	if err != nil {
		loc = time.UTC
	}
	return &cronPreviewOutput{Body: CronPreview{Timezone: loc.String(), Next: next,
		Fires: cronFires(next, by, loc, jobID, in.Body.JitterSeconds)}}, nil
}
