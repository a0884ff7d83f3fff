package openapi

import (
	"cmp"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/queue"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// validateTriggers checks that a job has a trigger or triggers (exactly
// one of the two), and makes a list of one its trigger, so such a job is
// stored and shown as any job with one trigger. It says whether the rest
// of the job can be checked (there is a trigger to read). What a trigger
// or a list holds is the engine's to check (queue.ValidateJob); what a
// list's entries cannot carry is checked here, as the engine's type of a
// listed trigger has no field for it.
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
	case len(j.Triggers) == 1:
		j.Trigger, j.Triggers = &j.Triggers[0], nil
		return true
	}
	for i, t := range j.Triggers {
		at := fmt.Sprintf("%s[%d]", fieldAt(prefix, "triggers"), i)
		if t.RunAt != nil || t.Upstream != nil || t.Mode != "" {
			errs.add(at, "has no run_at, upstream or mode in a list of triggers (each is cron or interval)", nil)
		}
	}
	return true
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
	}
	var specs []axtype.TriggerSpec
	if len(errs) == 0 {
		specs = make([]axtype.TriggerSpec, len(in.Body.Triggers))
		for i, t := range in.Body.Triggers {
			specs[i] = axtype.TriggerSpec{Kind: axtype.TriggerKind(t.Kind), CronExpr: t.Cron, Timezone: t.Timezone, IntervalSeconds: t.IntervalSeconds}
		}
		errs.addInvalidAt("body", queue.ValidateTriggers(specs))
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
