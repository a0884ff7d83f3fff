package queue

import (
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/cron"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// The names below are the parts of the engine's packages that the API
// uses, so that openapi imports queue alone (tests/importrules): each is
// the package's own, not a copy.

// Services of the engine's packages, as Engine holds them.
type (
	LeaseBroker     = dispatch.LeaseBroker
	CallbackService = delivery.CallbackService
	TaskCompleter   = delivery.TaskCompleter
)

// Types the API's inputs and outputs are made of.
type (
	AgentListParams     = db.AgentListParams
	ExecutionListParams = db.ExecutionListParams
	JobListParams       = db.JobListParams
	RerunFilter         = db.RerunCandidateParams
	CallbackPayload     = delivery.CallbackPayload
	OutboundPolicy      = outbound.Policy
	CronFieldError      = cron.FieldError
)

// Errors the engine's packages return.
var (
	ErrAgentNotActive    = dispatch.ErrAgentNotActive
	ErrExecutionNotEnded = delivery.ErrExecutionNotEnded
	ErrNoCallbackURL     = delivery.ErrNoCallbackURL
	ErrNoDelivery        = delivery.ErrNoDelivery
	ErrStaleCompletion   = delivery.ErrStaleCompletion
	ErrUnknownHTTPTask   = delivery.ErrUnknownHTTPTask

	ErrBackfillNotCron      = schedule.ErrBackfillNotCron
	ErrBackfillTooManyTicks = schedule.ErrBackfillTooManyTicks
)

// MaxHTTPResultBytes is how large a result an HTTP task's target may post
// (delivery.MaxHTTPResultBytes).
const MaxHTTPResultBytes = delivery.MaxHTTPResultBytes

// ParseCron parses a cron expression in a timezone (cron.Parse).
func ParseCron(expr, tz string) (*cron.Schedule, error) { return cron.Parse(expr, tz) }

// JitterOffset is how long after its tick a job's run starts, for a job
// with jitter_seconds (schedule.JitterOffset).
func JitterOffset(job uuid.UUID, tick time.Time, jitterSeconds int) time.Duration {
	return schedule.JitterOffset(job, tick, jitterSeconds)
}

// ExcludedBy is the first of calendars whose days hold tick, or nil
// (schedule.ExcludedBy).
func ExcludedBy(calendars []*axtype.Calendar, tick time.Time) *axtype.Calendar {
	return schedule.ExcludedBy(calendars, tick)
}

// CanonicalZone is the IANA name of a timezone (cron.CanonicalZone).
func CanonicalZone(name string) (string, error) { return cron.CanonicalZone(name) }

// ParseRouteKey checks a route-key template (dispatch.ParseRouteKey).
func ParseRouteKey(key string) error { return dispatch.ParseRouteKey(key) }

// ParseConcurrencyKey checks a concurrency-key template
// (dispatch.ParseConcurrencyKey).
func ParseConcurrencyKey(key string) error { return dispatch.ParseConcurrencyKey(key) }

// FloorInForce is a rate class's priority floor now, nil when none
// (dispatch.FloorInForce).
func FloorInForce(c *axtype.RateClass) *int { return dispatch.FloorInForce(c) }

// ExplainOutbound says why an outbound address was refused
// (outbound.Explain).
func ExplainOutbound(err error) string { return outbound.Explain(err) }

// ListFires lists the first n merged fires of a list of triggers after
// `after`, each with the triggers ticking then (schedule.ListFires).
func ListFires(specs []axtype.TriggerSpec, after time.Time, n int) ([]time.Time, [][]int, error) {
	return schedule.ListFires(specs, after, n)
}
