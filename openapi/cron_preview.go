package openapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/cron"
)

// CronPreviewRequest asks when an expression fires.
type CronPreviewRequest struct {
	Cron     string     `json:"cron" minLength:"1" maxLength:"200" example:"0 0 8 * * ?" doc:"Cron expression in ax's dialect"`
	Timezone string     `json:"timezone,omitempty" maxLength:"100" default:"UTC" example:"Asia/Shanghai" doc:"IANA timezone"`
	Count    int        `json:"count,omitempty" minimum:"1" maximum:"100" default:"5" doc:"How many fire times to list"`
	After    *time.Time `json:"after,omitempty" doc:"List fires strictly after this instant; default now"`
}

// CronPreview lists upcoming fire times.
type CronPreview struct {
	Cron     string      `json:"cron"`
	Timezone string      `json:"timezone"`
	Next     []time.Time `json:"next" doc:"Fire times in UTC, earliest first"`
}

type cronPreviewInput struct {
	Body CronPreviewRequest
}

type cronPreviewOutput struct {
	Body CronPreview
}

func registerCronPreview(api huma.API) {
	huma.Register(api, requireScope(huma.Operation{
		OperationID: "preview-cron", Method: http.MethodPost, Path: "/v1/cron/preview", Tags: []string{"Jobs"},
		Summary:     "List the next fire times of a cron expression",
		Description: "See what an expression means in a timezone, daylight-saving changes included, before saving a job.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, ScopeRead), previewCron)
}

func previewCron(_ context.Context, in *cronPreviewInput) (*cronPreviewOutput, error) {
	sched, err := cron.Parse(in.Body.Cron, in.Body.Timezone)
	if err != nil {
		field := "body.cron"
		var fe *cron.FieldError
		if errors.As(err, &fe) && fe.Field == "timezone" {
			field = "body.timezone"
		}
		return nil, huma.Error422UnprocessableEntity("invalid cron expression or timezone",
			&huma.ErrorDetail{Location: field, Message: cronReason(err)})
	}
	after := time.Now().UTC()
	if in.Body.After != nil {
		after = *in.Body.After
	}
	return &cronPreviewOutput{Body: CronPreview{
		Cron: in.Body.Cron, Timezone: sched.Location().String(), Next: sched.NextN(after, in.Body.Count),
	}}, nil
}
