package openapi

import (
	"errors"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// Resolve checks what struct tags cannot: the bounds of params, and the
// rules of a definition the engine owns (queue.ValidateJob: fields that
// depend on each other, cron expressions, timezones and URLs). Huma calls
// it after decoding, so every error names its field (body.trigger.cron…).
func (j *Job) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	j.Params.validate(prefix.With("params"), &errs)
	if !j.validateTriggers(prefix, &errs) {
		return errs // the rest reads the trigger
	}
	j.Shards.validatePresence(prefix, &errs)
	j.validateExclude(prefix, &errs)
	def := jobDefinition(j, uuid.Nil)
	errs.addInvalid(prefix, queue.ValidateJob(def, time.Now()))
	// Timezones canonical, as the engine stores them.
	if j.Trigger != nil {
		j.Trigger.Timezone = def.Timezone
	}
	for i := range j.Triggers {
		if i < len(def.Triggers) {
			j.Triggers[i].Timezone = def.Triggers[i].Timezone
		}
	}
	return errs
}

// fieldErrors collects validation errors in Huma's form.
type fieldErrors []error

func (e *fieldErrors) add(location, message string, value any) {
	*e = append(*e, &huma.ErrorDetail{Location: location, Message: message, Value: value})
}

// fieldAt is the location of a field path (dotted: "trigger.cron")
// under prefix. Unlike prefix.With, it leaves prefix as it was: With's
// pop takes back only the last segment of a dotted path.
func fieldAt(prefix *huma.PathBuffer, field string) string {
	if p := prefix.String(); p != "" {
		return p + "." + field
	}
	return field
}

// has says whether an error at location with message is in e.
func (e fieldErrors) has(location, message string) bool {
	for _, err := range e {
		if d, ok := err.(*huma.ErrorDetail); ok && d.Location == location && d.Message == message {
			return true
		}
	}
	return false
}

// addInvalid adds the fields of the engine's *axtype.InvalidError (none
// for another error or nil), under prefix.
func (e *fieldErrors) addInvalid(prefix *huma.PathBuffer, err error) {
	e.addInvalidAt(prefix.String(), err)
}

// addInvalidAt is addInvalid under a prefix given as a string ("body").
func (e *fieldErrors) addInvalidAt(prefix string, err error) {
	var invalid *axtype.InvalidError
	if !errors.As(err, &invalid) {
		return
	}
	for _, f := range invalid.Fields {
		at := f.Field
		if prefix != "" {
			at = prefix + "." + f.Field
		}
		if e.has(at, f.Message) {
			continue // found by the request's own checks already
		}
		e.add(at, f.Message, f.Value)
	}
}

// validatePresence checks what only the request can tell, since the
// engine's job cannot tell an absent shard range from an empty one or
// from the default: a range given must not be empty, and a generator
// takes none.
func (s *JobShards) validatePresence(prefix *huma.PathBuffer, errs *fieldErrors) {
	if s == nil || s.Range == nil {
		return
	}
	if s.Generator != nil {
		errs.add(fieldAt(prefix, "shards.range"), "is not used with shards.generator", s.Range)
	} else if s.Range.To <= s.Range.From {
		errs.add(fieldAt(prefix, "shards.range.to"), "must be greater than shards.range.from", s.Range.To)
	}
}
