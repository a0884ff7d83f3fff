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
	def := jobDefinition(j, uuid.Nil)
	errs.addInvalid(prefix, queue.ValidateJob(def, time.Now()))
	j.Trigger.Timezone = def.Timezone // canonical, as the engine stores it
	return errs
}

// fieldErrors collects validation errors in Huma's form.
type fieldErrors []error

func (e *fieldErrors) add(location, message string, value any) {
	*e = append(*e, &huma.ErrorDetail{Location: location, Message: message, Value: value})
}

// addInvalid adds the fields of the engine's *axtype.InvalidError (none
// for another error or nil), under prefix.
func (e *fieldErrors) addInvalid(prefix *huma.PathBuffer, err error) {
	var invalid *axtype.InvalidError
	if !errors.As(err, &invalid) {
		return
	}
	for _, f := range invalid.Fields {
		e.add(prefix.With(f.Field), f.Message, f.Value)
	}
}
