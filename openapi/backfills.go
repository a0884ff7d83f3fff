package openapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

type backfillHandlers struct {
	backfills *queue.BackfillService
	guard     groupGuard
}

// BackfillRequest asks for runs of a job's past ticks.
type BackfillRequest struct {
	From          time.Time `json:"from" doc:"The first instant of the range: its ticks at or after it" example:"2026-10-10T00:00:00Z"`
	To            time.Time `json:"to" doc:"The end of the range: its ticks before it; not after now (the schedule fires the coming ticks)" example:"2026-11-09T00:00:00Z"`
	MaxConcurrent int       `json:"max_concurrent,omitempty" minimum:"1" maximum:"1000" default:"1" doc:"At most this many of the backfill's runs unfinished at once; they are released in tick order"`
	Overlap       string    `json:"overlap,omitempty" enum:"allow,forbid" default:"allow" doc:"allow: release up to max_concurrent whatever else of the job runs; forbid: release a tick only while the job has no unfinished run at all"`
}

// Resolve checks the range.
func (r *BackfillRequest) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	for name, at := range map[string]time.Time{"from": r.From, "to": r.To} {
		if at.Year() < 2000 || at.Year() > 2200 {
			errs.add(prefix.With(name), "the year must be between 2000 and 2200", at)
		}
	}
	if len(errs) == 0 && !r.From.Before(r.To) {
		errs.add(prefix.With("to"), "must be after from", r.To)
	}
	return errs
}

type backfillCreateInput struct {
	ID             string          `path:"id" format:"uuid" doc:"Job id"`
	IdempotencyKey string          `header:"Idempotency-Key" maxLength:"200" doc:"A retried call with the same key (for the same job) answers with the backfill the first made"`
	Body           BackfillRequest `required:"true"`
}

// Backfill is the runs of a job's ticks over a past range, and how far
// they got.
type Backfill struct {
	ID            string        `json:"id" format:"uuid"`
	JobID         string        `json:"job_id" format:"uuid"`
	From          time.Time     `json:"from"`
	To            time.Time     `json:"to"`
	MaxConcurrent int           `json:"max_concurrent"`
	Overlap       string        `json:"overlap" enum:"allow,forbid"`
	State         string        `json:"state" enum:"running,finished,cancelled" doc:"running until every tick has a run and the backfill's runs have ended"`
	NextTick      time.Time     `json:"next_tick" doc:"The first tick not yet released (to, once none is left)"`
	Ticks         BackfillTicks `json:"ticks"`
	Runs          BackfillRuns  `json:"runs" doc:"The backfill's own runs, by outcome"`
	CreatedAt     time.Time     `json:"created_at"`
	FinishedAt    *time.Time    `json:"finished_at,omitempty"`
	StatusURL     string        `json:"status_url"`
}

// BackfillTicks counts a backfill's ticks.
type BackfillTicks struct {
	Total    int `json:"total" doc:"Ticks of the job's trigger in [from, to), in its timezone and daylight-saving rules"`
	Created  int `json:"created" doc:"Ticks given a run by this backfill"`
	Existing int `json:"existing" doc:"Ticks passed over: they had a run already (scheduled, caught up or backfilled)"`
}

// BackfillRuns counts a backfill's runs by outcome.
type BackfillRuns struct {
	Succeeded  int `json:"succeeded"`
	Failed     int `json:"failed" doc:"Failed, timed out or cancelled"`
	Unfinished int `json:"unfinished"`
}

func backfillFromDB(b *axtype.Backfill) *Backfill {
	return &Backfill{ID: b.ID.String(), JobID: b.JobID.String(), From: b.From, To: b.To, MaxConcurrent: b.MaxConcurrent,
		Overlap: string(b.Overlap), State: string(b.State), NextTick: b.NextTick,
		Ticks:     BackfillTicks{Total: b.TicksTotal, Created: b.TicksCreated, Existing: b.TicksExisting},
		Runs:      BackfillRuns{Succeeded: b.RunsSucceeded, Failed: b.RunsFailed, Unfinished: b.RunsUnfinished},
		CreatedAt: b.CreatedAt, FinishedAt: b.FinishedAt, StatusURL: "/v1/backfills/" + b.ID.String()}
}

type backfillAcceptedOutput struct {
	Location string `header:"Location" doc:"Status URL of the backfill"`
	Body     *Backfill
}

type backfillIDInput struct {
	ID string `path:"id" format:"uuid" doc:"Backfill id"`
}

type backfillOutput struct {
	Body *Backfill
}

type jobBackfillsInput struct {
	ID    string `path:"id" format:"uuid" doc:"Job id"`
	Limit int    `query:"limit" minimum:"1" maximum:"100" default:"20"`
}

type backfillListOutput struct {
	Body struct {
		Backfills []*Backfill `json:"backfills"`
	}
}

func (h *backfillHandlers) register(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "backfill-job", Method: http.MethodPost, Path: "/v1/jobs/{id}/backfill", Tags: []string{"Backfills"},
		Summary: "Run a cron job's past ticks that have no run", DefaultStatus: http.StatusAccepted,
		Description: "Every tick of the job's cron trigger in [from, to), in its timezone and daylight-saving rules, " +
			"that has no run yet gets one (cause backfill, scheduled_for the tick), released in tick order at most " +
			"max_concurrent at a time through the job's rate class. A tick the schedule fires meanwhile is not doubled, " +
			"and a second backfill of the same range adds nothing. The backfill is one row however many ticks: follow " +
			"it at the Location URL, stop it with POST /v1/backfills/{id}/cancel.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.create)
	register(api, requireScope(huma.Operation{
		OperationID: "get-backfill", Method: http.MethodGet, Path: "/v1/backfills/{id}", Tags: []string{"Backfills"},
		Summary: "A backfill and its progress", Errors: []int{http.StatusNotFound},
	}, ScopeRead), h.get)
	register(api, requireScope(huma.Operation{
		OperationID: "cancel-backfill", Method: http.MethodPost, Path: "/v1/backfills/{id}/cancel", Tags: []string{"Backfills"},
		Summary:     "Stop a backfill",
		Description: "No more of its ticks are released, and its unfinished runs are cancelled. A backfill that ended is left as it is.",
		Errors:      []int{http.StatusNotFound},
	}, ScopeSubmit), h.cancel)
	register(api, requireScope(huma.Operation{
		OperationID: "list-job-backfills", Method: http.MethodGet, Path: "/v1/jobs/{id}/backfills", Tags: []string{"Backfills"},
		Summary: "A job's backfills, newest first", Errors: []int{http.StatusNotFound},
	}, ScopeRead), h.listForJob)
}

func (h *backfillHandlers) create(ctx context.Context, in *backfillCreateInput) (*backfillAcceptedOutput, error) {
	jobID, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, jobID); err != nil {
		return nil, err
	}
	b, err := h.backfills.Create(ctx, &queue.BackfillRequest{JobID: jobID, From: in.Body.From.UTC(), To: in.Body.To.UTC(),
		MaxConcurrent: in.Body.MaxConcurrent, Overlap: axtype.BackfillOverlap(in.Body.Overlap), RequestKey: in.IdempotencyKey})
	switch {
	case errors.Is(err, queue.ErrBackfillNotCron):
		return nil, huma.Error422UnprocessableEntity("the job has no cron trigger",
			&huma.ErrorDetail{Location: "path.id", Message: err.Error(), Value: in.ID})
	case errors.Is(err, queue.ErrBackfillFuture), errors.Is(err, queue.ErrBackfillTooManyTicks):
		return nil, huma.Error422UnprocessableEntity("invalid range",
			&huma.ErrorDetail{Location: "body.to", Message: err.Error(), Value: in.Body.To})
	case err != nil:
		return nil, jobError(err, nil)
	}
	out := backfillFromDB(b)
	return &backfillAcceptedOutput{Location: out.StatusURL, Body: out}, nil
}

// backfill answers 404 when the caller may not see backfill id.
func (h *backfillHandlers) backfill(ctx context.Context, raw string) (uuid.UUID, error) {
	id, err := parseID(raw)
	if err != nil {
		return uuid.Nil, err
	}
	if keyGroups(ctx) == nil {
		return id, nil
	}
	group, err := h.backfills.Group(ctx, id)
	return id, h.guard.decide(ctx, group, err, "backfill not found")
}

func backfillError(err error) error {
	if errors.Is(err, axtype.ErrNotFound) {
		return huma.Error404NotFound("backfill not found")
	}
	return err
}

func (h *backfillHandlers) get(ctx context.Context, in *backfillIDInput) (*backfillOutput, error) {
	id, err := h.backfill(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	b, err := h.backfills.Get(ctx, id)
	if err != nil {
		return nil, backfillError(err)
	}
	return &backfillOutput{Body: backfillFromDB(b)}, nil
}

func (h *backfillHandlers) cancel(ctx context.Context, in *backfillIDInput) (*backfillOutput, error) {
	id, err := h.backfill(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	b, err := h.backfills.Cancel(ctx, id)
	if err != nil {
		return nil, backfillError(err)
	}
	return &backfillOutput{Body: backfillFromDB(b)}, nil
}

func (h *backfillHandlers) listForJob(ctx context.Context, in *jobBackfillsInput) (*backfillListOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	list, err := h.backfills.ListByJob(ctx, id, in.Limit)
	if err != nil {
		return nil, jobError(err, nil)
	}
	out := &backfillListOutput{}
	out.Body.Backfills = make([]*Backfill, 0, len(list))
	for _, b := range list {
		out.Body.Backfills = append(out.Body.Backfills, backfillFromDB(b))
	}
	return out, nil
}
