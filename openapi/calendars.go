package openapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// Calendar is a named list of dates that jobs exclude (exclude:
// ["cn-holidays"]): a tick on a listed date, read in the calendar's
// timezone, is skipped.
type Calendar struct {
	Name        string          `json:"name" minLength:"1" maxLength:"63" pattern:"^[a-z0-9][a-z0-9._-]{0,62}$" example:"cn-holidays" doc:"Jobs name it in exclude; 1-63 of a-z 0-9 . _ -, starting with a letter or digit"`
	Description string          `json:"description,omitempty" maxLength:"1000" example:"Public holidays observed in mainland China"`
	Timezone    string          `json:"timezone,omitempty" maxLength:"100" default:"UTC" example:"Asia/Shanghai" doc:"IANA timezone a tick's date is read in (the calendar's, not the job's)"`
	Entries     []CalendarEntry `json:"entries" maxItems:"1000" doc:"Excluded days, at most 1000 entries; each is one date, one inclusive range (from, to) or one yearly month-day"`
	Version     int64           `json:"version,omitempty" readOnly:"true" doc:"Grows on every change"`
	CreatedAt   time.Time       `json:"created_at" readOnly:"true"`
	UpdatedAt   time.Time       `json:"updated_at" readOnly:"true"`
}

// CalendarEntry is one excluded day or span: exactly one of date, from
// with to, or yearly.
type CalendarEntry struct {
	Date   string `json:"date,omitempty" maxLength:"10" example:"2026-12-25" doc:"One date, YYYY-MM-DD"`
	From   string `json:"from,omitempty" maxLength:"10" example:"2026-10-01" doc:"First date of an inclusive range (with to)"`
	To     string `json:"to,omitempty" maxLength:"10" example:"2026-10-07" doc:"Last date of an inclusive range (with from)"`
	Yearly string `json:"yearly,omitempty" maxLength:"5" example:"12-25" doc:"A month-day, MM-DD, excluded every year (02-29 only in leap years)"`
}

// Resolve checks the timezone and each entry, naming the field
// (body.entries[3].to).
func (c *Calendar) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	if canon, err := queue.CanonicalZone(c.Timezone); err != nil {
		errs.add(prefix.With("timezone"), err.Error(), c.Timezone)
	} else {
		c.Timezone = canon
	}
	for i, e := range c.Entries {
		at := fmt.Sprintf("entries[%d]", i)
		field, problem := axtype.CalendarEntry(e).Check()
		if problem == "" {
			continue
		}
		if field != "" {
			at += "." + field
		}
		errs.add(prefix.String()+"."+at, problem, e) // not With: its Pop cuts at the last "[" or "."
	}
	return errs
}

type calendarHandlers struct {
	calendars *queue.CalendarService
}

type calendarBodyInput struct {
	Body Calendar
}

type calendarNameInput struct {
	Name string `path:"name" maxLength:"63" example:"cn-holidays" doc:"Calendar name"`
}

type calendarUpdateInput struct {
	Name string `path:"name" maxLength:"63" example:"cn-holidays" doc:"Calendar name"`
	Body Calendar
}

type calendarOutput struct {
	Body *Calendar
}

type calendarCreatedOutput struct {
	Location string `header:"Location" doc:"URL of the new calendar"`
	Body     *Calendar
}

// CalendarList is every calendar, by name.
type CalendarList struct {
	Calendars []*Calendar `json:"calendars"`
}

type calendarListOutput struct {
	Body CalendarList
}

// calendarBodyLimit bounds a calendar: 1000 entries of a range are about
// 40 KiB.
const calendarBodyLimit = 256 << 10

func (h *calendarHandlers) register(api huma.API) {
	tags := []string{"Calendars"}
	register(api, requireScope(huma.Operation{
		OperationID: "create-calendar", Method: http.MethodPost, Path: "/v1/calendars", Tags: tags,
		Summary: "Create a calendar", DefaultStatus: http.StatusCreated, MaxBodyBytes: calendarBodyLimit,
		Description: "Stores a named list of excluded days that jobs name in exclude. " +
			"A key limited to job groups cannot change calendars: every group's jobs may use them.",
		Errors: []int{http.StatusConflict, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.create)
	register(api, requireScope(huma.Operation{
		OperationID: "list-calendars", Method: http.MethodGet, Path: "/v1/calendars", Tags: tags,
		Summary: "List calendars", Description: "Every calendar with its entries, by name.",
	}, ScopeRead), h.list)
	register(api, requireScope(huma.Operation{
		OperationID: "get-calendar", Method: http.MethodGet, Path: "/v1/calendars/{name}", Tags: tags,
		Summary: "Get a calendar", Errors: []int{http.StatusNotFound},
		Description: "The calendar's timezone and entries; what GET returns may be sent back with PUT.",
	}, ScopeRead), h.get)
	register(api, requireScope(huma.Operation{
		OperationID: "update-calendar", Method: http.MethodPut, Path: "/v1/calendars/{name}", Tags: tags,
		Summary: "Replace a calendar", MaxBodyBytes: calendarBodyLimit,
		Description: "Replaces the timezone and entries. Every job that excludes the calendar follows the change " +
			"from its next tick; the jobs are not changed.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.update)
	register(api, requireScope(huma.Operation{
		OperationID: "delete-calendar", Method: http.MethodDelete, Path: "/v1/calendars/{name}", Tags: tags,
		Summary: "Delete a calendar", DefaultStatus: http.StatusNoContent,
		Description: "Refused with 409 naming the jobs while any job excludes the calendar: take it out of their exclude first.",
		Errors:      []int{http.StatusNotFound, http.StatusConflict},
	}, ScopeSubmit), h.delete)
}

func (h *calendarHandlers) create(ctx context.Context, in *calendarBodyInput) (*calendarCreatedOutput, error) {
	if err := calendarsWritable(ctx); err != nil {
		return nil, err
	}
	c, err := h.calendars.Create(ctx, calendarToDB(&in.Body, in.Body.Name))
	if errors.Is(err, axtype.ErrConflict) {
		return nil, huma.Error409Conflict("calendar exists",
			&huma.ErrorDetail{Location: "body.name", Message: "is taken", Value: in.Body.Name})
	}
	if err != nil {
		return nil, calendarError(err)
	}
	return &calendarCreatedOutput{Location: "/v1/calendars/" + c.Name, Body: calendarFromDB(c)}, nil
}

func (h *calendarHandlers) list(ctx context.Context, _ *struct{}) (*calendarListOutput, error) {
	cals, err := h.calendars.List(ctx)
	if err != nil {
		return nil, err
	}
	out := &calendarListOutput{Body: CalendarList{Calendars: make([]*Calendar, len(cals))}}
	for i, c := range cals {
		out.Body.Calendars[i] = calendarFromDB(c)
	}
	return out, nil
}

func (h *calendarHandlers) get(ctx context.Context, in *calendarNameInput) (*calendarOutput, error) {
	return calendarResponse(h.calendars.Get(ctx, in.Name))
}

func (h *calendarHandlers) update(ctx context.Context, in *calendarUpdateInput) (*calendarOutput, error) {
	if in.Body.Name != in.Name {
		return nil, huma.Error422UnprocessableEntity("the body names another calendar",
			&huma.ErrorDetail{Location: "body.name", Message: "must be the calendar's name in the path (" + in.Name + "): a calendar is not renamed", Value: in.Body.Name})
	}
	if err := calendarsWritable(ctx); err != nil {
		return nil, err
	}
	return calendarResponse(h.calendars.Update(ctx, calendarToDB(&in.Body, in.Name)))
}

func (h *calendarHandlers) delete(ctx context.Context, in *calendarNameInput) (*struct{}, error) {
	if err := calendarsWritable(ctx); err != nil {
		return nil, err
	}
	err := h.calendars.Delete(ctx, in.Name)
	var inUse *axtype.CalendarInUseError
	if errors.As(err, &inUse) {
		more := ""
		if inUse.More {
			more = " and more"
		}
		return nil, huma.Error409Conflict(fmt.Sprintf("calendar %s is excluded by jobs %s%s: take it out of their exclude first",
			in.Name, strings.Join(inUse.Jobs, ", "), more),
			&huma.ErrorDetail{Location: "path.name", Message: "is in use by " + strings.Join(inUse.Jobs, ", ") + more, Value: in.Name})
	}
	return nil, calendarError(err)
}

// calendarsWritable refuses a key limited to job groups: a calendar is
// shared by the jobs of every group.
func calendarsWritable(ctx context.Context) error {
	if keyGroups(ctx) == nil {
		return nil
	}
	return huma.Error403Forbidden("this API key is limited to job groups: calendars are shared by every group, so it cannot change them")
}

func calendarResponse(c *axtype.Calendar, err error) (*calendarOutput, error) {
	if err != nil {
		return nil, calendarError(err)
	}
	return &calendarOutput{Body: calendarFromDB(c)}, nil
}

func calendarError(err error) error {
	var ce *axtype.ConstraintError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, axtype.ErrNotFound):
		return huma.Error404NotFound("calendar not found")
	case errors.As(err, &ce):
		return huma.Error422UnprocessableEntity("the calendar breaks rule "+ce.Constraint,
			&huma.ErrorDetail{Location: "body", Message: "violates " + ce.Constraint})
	}
	return err
}

func calendarToDB(c *Calendar, name string) *axtype.Calendar {
	out := &axtype.Calendar{Name: name, Description: c.Description, Timezone: c.Timezone,
		Entries: make([]axtype.CalendarEntry, len(c.Entries))}
	for i, e := range c.Entries {
		out.Entries[i] = axtype.CalendarEntry(e)
	}
	return out
}

func calendarFromDB(c *axtype.Calendar) *Calendar {
	out := &Calendar{Name: c.Name, Description: c.Description, Timezone: c.Timezone, Version: c.Version,
		Entries: make([]CalendarEntry, len(c.Entries)), CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
	for i, e := range c.Entries {
		out.Entries[i] = CalendarEntry(e)
	}
	return out
}
