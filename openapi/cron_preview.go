package openapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
)

// CronPreviewRequest asks when an expression fires.
type CronPreviewRequest struct {
	Cron     string       `json:"cron,omitempty" minLength:"1" maxLength:"200" example:"0 0 8 * * ?" doc:"Cron expression in ax's dialect. Give this or triggers"`
	Triggers []JobTrigger `json:"triggers,omitempty" maxItems:"16" doc:"A job's list of triggers (cron or interval, as in the job's triggers), instead of cron: the merged fires of all, each naming the triggers that tick then. An interval ticks from the Unix epoch here (a job's, from its active_from)"`
	Timezone string       `json:"timezone,omitempty" maxLength:"100" default:"UTC" example:"Asia/Shanghai" doc:"IANA timezone"`
	Count    int          `json:"count,omitempty" minimum:"1" maximum:"100" default:"5" doc:"How many fire times to list"`
	After    *time.Time   `json:"after,omitempty" doc:"List fires strictly after this instant; default now"`
	// The jitter offset depends on the job, so a jittered preview names it.
	JobID         string `json:"job_id,omitempty" format:"uuid" doc:"With jitter_seconds: the job whose jittered start times to show (the offset of a tick comes from the job id and the tick)"`
	JitterSeconds int    `json:"jitter_seconds,omitempty" minimum:"0" maximum:"86400" doc:"Show each fire's jittered start (starts_at) for job_id with this jitter, as the job's jitter_seconds would make it"`
	// Exclude previews a job's exclude list: its calendars as they are now.
	Exclude []string `json:"exclude,omitempty" maxItems:"16" example:"[\"cn-holidays\"]" doc:"Calendars (as a job's exclude) whose days are passed over: next and fires list only ticks that fire, excluded the ticks skipped between them"`
}

// CronPreview lists upcoming fire times.
type CronPreview struct {
	Cron     string      `json:"cron,omitempty"`
	Timezone string      `json:"timezone" doc:"The timezone local times are shown in (with triggers: the first trigger's)"`
	Next     []time.Time `json:"next" doc:"Fire times in UTC, earliest first"`
	Fires    []CronFire  `json:"fires" doc:"The same fire times, each with its wall time in the timezone"`
	Excluded []CronFire  `json:"excluded,omitempty" doc:"With exclude: the ticks among them that a calendar skips, each naming it (excluded_by)"`
}

// CronFire is one fire time, in UTC and on the timezone's clock.
type CronFire struct {
	UTC    time.Time `json:"utc" doc:"The instant, in UTC"`
	Local  string    `json:"local" example:"2026-03-29T03:30:00+02:00" doc:"Wall time in the timezone, RFC 3339 with the offset in effect (+00:00, not Z, for a zero offset)"`
	Offset string    `json:"offset" example:"+02:00" doc:"Offset from UTC in effect at that instant"`
	Zone   string    `json:"zone" example:"CEST" doc:"Abbreviation in effect at that instant (as the tz database names it; some zones have none but the offset)"`
	// StartsAt is set for a jittered preview.
	StartsAt *time.Time `json:"starts_at,omitempty" doc:"With job_id and jitter_seconds: when the run's tasks become leasable, the fire time plus the job's jitter offset for it"`
	// Triggers is set for a preview of a list.
	Triggers []int `json:"triggers,omitempty" doc:"With triggers: the indexes of the triggers that tick at this instant (one run; the first is the run's trigger_index)"`
	// ExcludedBy is set on the ticks of excluded.
	ExcludedBy string `json:"excluded_by,omitempty" example:"cn-holidays" doc:"In excluded: the calendar that skips this tick"`
}

type cronPreviewInput struct {
	Body CronPreviewRequest
}

type cronPreviewOutput struct {
	Body CronPreview
}

type cronPreviewHandlers struct {
	calendars *queue.CalendarService
}

func registerCronPreview(api huma.API, calendars *queue.CalendarService) {
	h := &cronPreviewHandlers{calendars: calendars}
	register(api, requireScope(huma.Operation{
		OperationID: "preview-cron", Method: http.MethodPost, Path: "/v1/cron/preview", Tags: []string{"Jobs"},
		Summary:     "List the next fire times of a cron expression",
		Description: "See what an expression means in a timezone, daylight-saving changes included, before saving a job.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, ScopeRead), h.previewCron)
}

func (h *cronPreviewHandlers) previewCron(ctx context.Context, in *cronPreviewInput) (*cronPreviewOutput, error) {
	if in.Body.Triggers != nil || in.Body.Cron == "" {
		return previewTriggers(in)
	}
	sched, err := queue.ParseCron(in.Body.Cron, in.Body.Timezone)
	if err != nil {
		field := "body.cron"
		var fe *queue.CronFieldError
		if errors.As(err, &fe) && fe.Field == "timezone" {
			field = "body.timezone"
		}
		return nil, huma.Error422UnprocessableEntity("invalid cron expression or timezone",
			&huma.ErrorDetail{Location: field, Message: queue.CronReason(err)})
	}
	jobID, err := previewJitterJob(&in.Body)
	if err != nil {
		return nil, err
	}
	after := time.Now().UTC()
	if in.Body.After != nil {
		after = *in.Body.After
	}
	excluding, err := h.excluding(ctx, in.Body.Exclude)
	if err != nil {
		return nil, err
	}
	out := CronPreview{Cron: in.Body.Cron, Timezone: sched.Location().String(), Next: []time.Time{}, Fires: []CronFire{}}
	// Excluded ticks are passed over, up to a bound: a calendar may
	// exclude every day for years.
	for at, scanned := sched.Next(after), 0; !at.IsZero() && len(out.Next) < in.Body.Count && scanned < maxPreviewTicks; at, scanned = sched.Next(at), scanned+1 {
		local := at.In(sched.Location())
		zone, _ := local.Zone()
		fire := CronFire{UTC: at.UTC(), Local: local.Format("2006-01-02T15:04:05-07:00"), Offset: local.Format("-07:00"), Zone: zone}
		if cal := queue.ExcludedBy(excluding, at); cal != nil {
			fire.ExcludedBy = cal.Name
			out.Excluded = append(out.Excluded, fire)
			continue
		}
		if in.Body.JitterSeconds > 0 {
			start := at.Add(queue.JitterOffset(jobID, at, in.Body.JitterSeconds)).UTC()
			fire.StartsAt = &start
		}
		out.Next, out.Fires = append(out.Next, at.UTC()), append(out.Fires, fire)
	}
	return &cronPreviewOutput{Body: out}, nil
}

// maxPreviewTicks bounds the ticks a preview looks at.
const maxPreviewTicks = 10_000

// excluding reads the calendars a preview excludes; a missing one is 422
// naming it.
func (h *cronPreviewHandlers) excluding(ctx context.Context, names []string) ([]*axtype.Calendar, error) {
	if len(names) == 0 {
		return nil, nil
	}
	cals, err := h.calendars.GetMany(ctx, names)
	if err != nil {
		return nil, err
	}
	for i, name := range names {
		if !slices.ContainsFunc(cals, func(c *axtype.Calendar) bool { return c.Name == name }) {
			return nil, huma.Error422UnprocessableEntity("unknown calendar",
				&huma.ErrorDetail{Location: fmt.Sprintf("body.exclude[%d]", i), Message: "names no calendar", Value: name})
		}
	}
	return cals, nil
}

// cronFires shows fire times on loc's clock; by, when set, names the
// triggers of each.
func cronFires(next []time.Time, by [][]int, loc *time.Location, jobID uuid.UUID, jitter int) []CronFire {
	fires := make([]CronFire, len(next))
	for i, at := range next {
		local := at.In(loc)
		zone, _ := local.Zone()
		fires[i] = CronFire{UTC: at.UTC(), Local: local.Format("2006-01-02T15:04:05-07:00"), Offset: local.Format("-07:00"), Zone: zone}
		if jitter > 0 {
			start := at.Add(queue.JitterOffset(jobID, at, jitter)).UTC()
			fires[i].StartsAt = &start
		}
		if by != nil {
			fires[i].Triggers = by[i]
		}
	}
	return fires
}

// previewJitterJob returns the job a jittered preview is for.
func previewJitterJob(r *CronPreviewRequest) (uuid.UUID, error) {
	if r.JitterSeconds == 0 {
		return uuid.Nil, nil
	}
	id, err := uuid.Parse(r.JobID)
	if err != nil {
		return uuid.Nil, huma.Error422UnprocessableEntity("job_id is required with jitter_seconds",
			&huma.ErrorDetail{Location: "body.job_id", Message: "is required with jitter_seconds: a tick's offset comes from the job id", Value: r.JobID})
	}
	return id, nil
}
