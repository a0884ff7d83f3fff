package openapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

type executionHandlers struct {
	execs     *queue.ExecutionService
	waiter    *queue.ExecutionWaiter
	callbacks *queue.CallbackService
	guard     groupGuard
}

// TriggerRequest is the optional body of a trigger call.
type TriggerRequest struct {
	Params   Params `json:"params,omitempty" doc:"Overlay the job's params for this run: a JSON object of at most 256 KiB, nesting at most 64 levels, kept exactly"`
	Priority *int   `json:"priority,omitempty" minimum:"-1000" maximum:"1000" doc:"Run at this priority instead of the job's"`
	RunLater
}

// RunLater is when a run should fire, when not at once.
type RunLater struct {
	RunAt        *time.Time `json:"run_at,omitempty" doc:"Fire at this instant instead of now (at most 400 days ahead; one in the past fires at once). The run is stored as scheduled and fires like a cron tick, under the job's misfire and concurrency policies; cancel it with its id or its Idempotency-Key"`
	DelaySeconds *int64     `json:"delay_seconds,omitempty" minimum:"0" maximum:"34560000" doc:"Fire this many seconds from now instead of now; not with run_at"`
}

// validate checks the two fields together.
func (r *RunLater) validate(prefix *huma.PathBuffer, errs *fieldErrors) {
	if r.RunAt != nil && r.DelaySeconds != nil {
		errs.add(prefix.With("delay_seconds"), "set run_at or delay_seconds, not both", *r.DelaySeconds)
	}
	if r.RunAt != nil && r.RunAt.After(time.Now().Add(queue.MaxRunDelay)) {
		errs.add(prefix.With("run_at"), "must be at most 400 days ahead", r.RunAt)
	}
}

// when is the run's time; nil: now, not delayed.
func (r *RunLater) when() *time.Time {
	switch {
	case r.RunAt != nil:
		t := r.RunAt.UTC()
		return &t
	case r.DelaySeconds != nil:
		t := time.Now().UTC().Add(time.Duration(*r.DelaySeconds) * time.Second)
		return &t
	}
	return nil
}

// Resolve bounds the params' nesting.
func (r *TriggerRequest) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	r.Params.validate(prefix.With("params"), &errs)
	r.RunLater.validate(prefix, &errs)
	return errs
}

type triggerInput struct {
	ID             string          `path:"id" format:"uuid" doc:"Job id"`
	IdempotencyKey string          `header:"Idempotency-Key" maxLength:"255" doc:"Same key and body: the same execution, not a second run; same key, other body: 422"`
	TraceParent    string          `header:"traceparent" maxLength:"55" doc:"W3C trace context: the run joins this trace (agents and callbacks get it); invalid values are ignored, as the W3C spec asks"`
	Body           *TriggerRequest `required:"false"`
}

type executionAcceptedOutput struct {
	Location string `header:"Location" doc:"Status URL of the execution"`
	Body     *Execution
}

type executionIDInput struct {
	ID string `path:"id" format:"uuid" doc:"Execution id"`
}

type executionOutput struct {
	Body *Execution
}

type executionListInput struct {
	JobID  string    `query:"job_id" format:"uuid" doc:"Only executions of this job"`
	State  string    `query:"state" enum:"pending,running,succeeded,failed,timed_out,cancelled" doc:"Only executions in this state"`
	From   time.Time `query:"from" doc:"Only executions scheduled at or after this instant"`
	To     time.Time `query:"to" doc:"Only executions scheduled before this instant"`
	Limit  int       `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string    `query:"cursor" maxLength:"100" doc:"next_cursor of the previous page"`
}

type jobExecutionListInput struct {
	ID     string    `path:"id" format:"uuid" doc:"Job id"`
	State  string    `query:"state" enum:"pending,running,succeeded,failed,timed_out,cancelled"`
	From   time.Time `query:"from"`
	To     time.Time `query:"to"`
	Limit  int       `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string    `query:"cursor" maxLength:"100"`
}

// ExecutionList is one page of executions, newest first.
type ExecutionList struct {
	Executions []*Execution `json:"executions"`
	NextCursor string       `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last"`
}

type executionListOutput struct {
	Body ExecutionList
}

type skippedInput struct {
	ID    string `path:"id" format:"uuid" doc:"Job id"`
	Limit int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
}

type explainInput struct {
	ID string `path:"id" format:"uuid" doc:"Job id"`
	At string `query:"at" required:"true" maxLength:"40" example:"2026-03-29T01:30:00" doc:"The instant: RFC 3339 with an offset (2026-03-29T01:30:00Z), or a wall time without one (2026-03-29T01:30:00), read in the job's timezone"`
}

type explainOutput struct {
	Body TickExplanation
}

type skippedOutput struct {
	Body struct {
		Skipped []SkippedFire `json:"skipped"`
	}
}

func (h *executionHandlers) register(api huma.API) {
	h.registerLogs(api)
	h.registerDelayed(api)
	h.registerReruns(api)
	register(api, requireScope(huma.Operation{
		OperationID: "trigger-job", Method: http.MethodPost, Path: "/v1/jobs/{id}/trigger", Tags: []string{"Jobs"},
		Summary: "Run a job now, or later", DefaultStatus: http.StatusAccepted, MaxBodyBytes: jobBodyLimit,
		Description: "Creates an execution at once and answers 202 with it; poll the Location URL for its state. " +
			"Honours Idempotency-Key. A job whose concurrency policy is forbid answers 409 while a run is unfinished; replace cancels it; " +
			"queue makes the new run wait (state pending, queue.waiting) and start when the unfinished one ends, and answers 409 " +
			"when a run waits already. " +
			"With run_at or delay_seconds the run is stored as scheduled (state scheduled, no tasks yet) and fires at that time " +
			"as the execution with the same id, under the job's misfire and concurrency policies (a forbidden overlap is then " +
			"recorded as a skip). Cancel it by id (POST /v1/executions/{id}/cancel) or by its Idempotency-Key " +
			"(POST /v1/runs/cancel), which lives until a day after run_at.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.trigger)
	register(api, requireScope(huma.Operation{
		OperationID: "get-execution", Method: http.MethodGet, Path: "/v1/executions/{id}", Tags: []string{"Executions"},
		Summary: "Get an execution with its tasks and callback", Errors: []int{http.StatusNotFound, http.StatusGone},
		Description: "The status query of a run. With wait=30s it long-polls: it answers as soon as the execution " +
			"has ended (or after the wait, with its state then). 410 Gone: the run ended longer ago than its history " +
			"retention and was removed.",
	}, ScopeRead), h.getExecution)
	register(api, requireScope(huma.Operation{
		OperationID: "list-executions", Method: http.MethodGet, Path: "/v1/executions", Tags: []string{"Executions"},
		Summary: "List executions", Description: "Newest first; filter by job, state and scheduled time.",
	}, ScopeRead), h.list)
	register(api, requireScope(huma.Operation{
		OperationID: "list-job-executions", Method: http.MethodGet, Path: "/v1/jobs/{id}/executions", Tags: []string{"Jobs"},
		Summary: "List a job's executions", Errors: []int{http.StatusNotFound},
		Description: "The job's runs, newest first, in flight and ended (history included), filtered by state and scheduled time, a page at a time (next_cursor).",
	}, ScopeRead), h.listForJob)
	register(api, requireScope(huma.Operation{
		OperationID: "cancel-execution", Method: http.MethodPost, Path: "/v1/executions/{id}/cancel", Tags: []string{"Executions"},
		Summary:     "Cancel an execution",
		Description: "Pending tasks are cancelled at once; running ones are told to stop and the execution stays running until they do. Cancelling a finished execution changes nothing. A scheduled delayed run is cancelled before it fires (state cancelled, kept a day).",
		Errors:      []int{http.StatusNotFound},
	}, ScopeSubmit), h.cancel)
	register(api, requireScope(huma.Operation{
		OperationID: "list-skipped-fires", Method: http.MethodGet, Path: "/v1/jobs/{id}/skipped", Tags: []string{"Jobs"},
		Summary:     "List ticks that did not fire, with why",
		Description: "Misfires, overlaps, pauses: newest first. Answers \"why did it not run at 03:00?\"",
		Errors:      []int{http.StatusNotFound},
	}, ScopeRead), h.skipped)
	register(api, requireScope(huma.Operation{
		OperationID: "explain-tick", Method: http.MethodGet, Path: "/v1/jobs/{id}/explain", Tags: []string{"Jobs"},
		Summary: "Say what became of one instant of a job's schedule",
		Description: "\"Why didn't it run at 03:00?\" in one call, from the records: the run fired for that tick and its state, " +
			"or the skip recorded and why (an overlap names the run still unfinished), or that the instant is not a tick " +
			"(with the next one), falls in a daylight-saving gap of the job's timezone, precedes the job, or comes while it is paused.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeRead), h.explain)
}

func (h *executionHandlers) explain(ctx context.Context, in *explainInput) (*explainOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	at, wall, err := parseExplainAt(in.At)
	if err != nil {
		return nil, huma.Error422UnprocessableEntity("invalid instant",
			&huma.ErrorDetail{Location: "query.at", Message: err.Error(), Value: in.At})
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	x, err := h.execs.Explain(ctx, id, at, wall)
	if err != nil {
		return nil, jobError(err, nil)
	}
	out := &explainOutput{Body: TickExplanation{At: x.At, Local: x.Local, Verdict: x.Verdict, Reason: x.Reason, Tick: x.Tick,
		Execution: executionBrief(x.Execution), Running: executionBrief(x.Running), NextTick: x.NextTick}}
	for _, t := range x.Triggers {
		spec := jobTriggersFromDB([]axtype.TriggerSpec{t.Spec})[0]
		out.Body.Triggers = append(out.Body.Triggers, TriggerTick{Index: t.Index, Trigger: spec, Tick: t.Tick, NextTick: t.NextTick})
	}
	if x.Skip != nil {
		out.Body.Skip = &SkippedFire{Reason: string(x.Skip.Reason), FirstTick: x.Skip.FirstTick, LastTick: x.Skip.LastTick,
			TickCount: x.Skip.TickCount, Detail: x.Skip.Detail, RecordedAt: x.Skip.RecordedAt}
	}
	return out, nil
}

// parseExplainAt reads an instant with an offset, or a wall time without
// one (wall: read it in the job's timezone), within the years cron
// schedules reach.
func parseExplainAt(s string) (at time.Time, wall bool, err error) {
	if at, err = time.Parse(time.RFC3339Nano, s); err != nil {
		if at, err = time.Parse("2006-01-02T15:04:05", s); err != nil {
			return time.Time{}, false, errors.New("want RFC 3339 (2026-03-29T01:30:00Z) or a wall time (2026-03-29T01:30:00)")
		}
		wall = true
	}
	if at.Year() < 2000 || at.Year() > 2200 {
		return time.Time{}, false, errors.New("the year must be between 2000 and 2200")
	}
	return at, wall, nil
}

func (h *executionHandlers) trigger(ctx context.Context, in *triggerInput) (*executionAcceptedOutput, error) {
	jobID, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, jobID); err != nil {
		return nil, err
	}
	req := &queue.TriggerRequest{JobID: jobID, IdempotencyKey: in.IdempotencyKey,
		Method: http.MethodPost, Path: "/v1/jobs/" + jobID.String() + "/trigger"}
	if in.Body != nil && in.Body.Params != nil {
		req.Params = json.RawMessage(in.Body.Params)
	}
	if in.Body != nil {
		req.Priority = in.Body.Priority
	}
	if ValidTraceParent(in.TraceParent) {
		req.TraceParent = in.TraceParent
	}
	if in.IdempotencyKey != "" {
		key, _ := ctx.Value(principalKey{}).(*axtype.APIKey)
		if key != nil {
			req.APIKeyID = key.ID
		}
		// The hash is over the decoded body re-encoded (map keys sorted), so
		// a retry that differs only in spacing or key order still matches.
		if req.RequestHash, err = bodyHash(in.Body); err != nil {
			return nil, err
		}
	}
	if in.Body != nil {
		if when := in.Body.when(); when != nil {
			return h.triggerLater(ctx, req, *when)
		}
	}
	exec, _, err := h.execs.Trigger(ctx, req)
	switch {
	case errors.Is(err, queue.ErrIdempotencyMismatch):
		return nil, huma.Error422UnprocessableEntity("Idempotency-Key was used for a different request",
			&huma.ErrorDetail{Location: "header.Idempotency-Key", Message: "was used before with another body", Value: in.IdempotencyKey})
	case errors.Is(err, queue.ErrOverlapForbidden), errors.Is(err, queue.ErrOverlapQueueFull):
		return nil, huma.Error409Conflict(err.Error())
	case err != nil:
		return nil, jobError(err, nil)
	}
	out, err := executionFromDB(exec, nil)
	if err != nil {
		return nil, err
	}
	return &executionAcceptedOutput{Location: out.StatusURL, Body: out}, nil
}

// triggerLater schedules the run of a trigger call with run_at or
// delay_seconds.
func (h *executionHandlers) triggerLater(ctx context.Context, req *queue.TriggerRequest, when time.Time) (*executionAcceptedOutput, error) {
	res, err := h.execs.Schedule(ctx, &queue.DelayedRunRequest{TriggerRequest: req, RunAt: when})
	switch {
	case errors.Is(err, queue.ErrIdempotencyMismatch):
		return nil, huma.Error422UnprocessableEntity("Idempotency-Key was used for a different request",
			&huma.ErrorDetail{Location: "header.Idempotency-Key", Message: "was used before with another body", Value: req.IdempotencyKey})
	case err != nil:
		return nil, jobError(err, nil)
	}
	out, err := h.runView(ctx, res.ID)
	if err != nil {
		return nil, err
	}
	return &executionAcceptedOutput{Location: out.StatusURL, Body: out}, nil
}

// runView shows id as it is now: the execution, or the delayed run that
// has yet to fire.
func (h *executionHandlers) runView(ctx context.Context, id uuid.UUID) (*Execution, error) {
	run, err := h.execs.ScheduledRun(ctx, id)
	if err == nil {
		return executionFromScheduled(run), nil
	}
	if !errors.Is(err, axtype.ErrNotFound) {
		return nil, err
	}
	exec, err := h.execs.Execution(ctx, id) // its tasks are not shown
	if err != nil {
		return nil, executionError(err)
	}
	return executionFromDB(exec, nil)
}

func (h *executionHandlers) cancel(ctx context.Context, in *executionIDInput) (*executionOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.execution(ctx, id); err != nil {
		return nil, err
	}
	if run, err := h.execs.CancelRun(ctx, id, "cancelled through the API"); err == nil {
		return &executionOutput{Body: executionFromScheduled(run)}, nil
	} else if !errors.Is(err, axtype.ErrNotFound) {
		return nil, err
	}
	exec, err := h.execs.Cancel(ctx, id, "cancelled through the API")
	if err != nil {
		return nil, executionError(err)
	}
	out, err := executionFromDB(exec, nil)
	return &executionOutput{Body: out}, err
}

func (h *executionHandlers) list(ctx context.Context, in *executionListInput) (*executionListOutput, error) {
	p := &queue.ExecutionListParams{}
	if in.JobID != "" {
		id, err := uuid.Parse(in.JobID)
		if err != nil {
			return nil, huma.Error422UnprocessableEntity("invalid job_id",
				&huma.ErrorDetail{Location: "query.job_id", Message: "must be a UUID", Value: in.JobID})
		}
		if err := h.guard.job(ctx, id); err != nil {
			return nil, err
		}
		p.JobID = &id
	}
	return h.page(ctx, p, in.State, in.From, in.To, in.Limit, in.Cursor)
}

func (h *executionHandlers) listForJob(ctx context.Context, in *jobExecutionListInput) (*executionListOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	return h.page(ctx, &queue.ExecutionListParams{JobID: &id}, in.State, in.From, in.To, in.Limit, in.Cursor)
}

func (h *executionHandlers) page(ctx context.Context, p *queue.ExecutionListParams, state string, from, to time.Time, limit int, cursor string) (*executionListOutput, error) {
	if state != "" {
		s := axtype.ExecutionState(state)
		p.State = &s
	}
	if !from.IsZero() {
		p.From = &from
	}
	if !to.IsZero() {
		p.To = &to
	}
	if cursor != "" {
		before, err := decodeCursor(cursor)
		if err != nil {
			return nil, invalidCursor(cursor)
		}
		p.Before = &before
	}
	p.Limit = limit + 1
	p.Groups = keyGroups(ctx)
	execs, err := h.execs.List(ctx, p)
	if err != nil {
		return nil, jobError(err, nil) // a job filter naming no job: 404
	}
	out := &executionListOutput{Body: ExecutionList{Executions: make([]*Execution, 0, len(execs))}}
	if len(execs) > limit {
		execs = execs[:limit]
		out.Body.NextCursor = encodeCursor(execs[len(execs)-1].ID)
	}
	for _, e := range execs {
		ae, err := executionFromDB(e, nil)
		if err != nil {
			return nil, err
		}
		out.Body.Executions = append(out.Body.Executions, ae)
	}
	return out, nil
}

func (h *executionHandlers) skipped(ctx context.Context, in *skippedInput) (*skippedOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	skips, err := h.execs.SkippedFires(ctx, id, in.Limit)
	if err != nil {
		return nil, jobError(err, nil)
	}
	out := &skippedOutput{}
	out.Body.Skipped = make([]SkippedFire, 0, len(skips))
	for _, s := range skips {
		out.Body.Skipped = append(out.Body.Skipped, SkippedFire{Reason: string(s.Reason), FirstTick: s.FirstTick,
			LastTick: s.LastTick, TickCount: s.TickCount, Detail: s.Detail, RecordedAt: s.RecordedAt})
	}
	return out, nil
}

func executionError(err error) error {
	switch {
	case errors.Is(err, axtype.ErrRemoved):
		return huma.Error410Gone("execution removed: it ended longer ago than its job's history retention " +
			"(GET /v1/history shows the server's), and its history partition was dropped")
	case errors.Is(err, axtype.ErrNotFound):
		return huma.Error404NotFound("execution not found")
	}
	return err
}

type executionLogsInput struct {
	ID    string `path:"id" format:"uuid" doc:"Execution id"`
	After int64  `query:"after" minimum:"0" doc:"Only events after this event id (the last one seen): follow a run by polling"`
	Kind  string `query:"kind" enum:"state,log" doc:"Only state changes or only output"`
	Limit int    `query:"limit" minimum:"1" maximum:"10000" default:"1000"`
}

// TaskEvent is a state change or a chunk of output of one task.
type TaskEvent struct {
	ID         int64     `json:"id" doc:"Increasing; pass the last as after to follow"`
	TaskID     string    `json:"task_id" format:"uuid"`
	ShardIndex int       `json:"shard_index"`
	Attempt    int       `json:"attempt"`
	Kind       string    `json:"kind" enum:"state,log"`
	State      string    `json:"state,omitempty"`
	AgentID    string    `json:"agent_id,omitempty"`
	WorkerHost string    `json:"worker_host,omitempty" doc:"Host name of the agent behind a state event (lease, result, release, reaped lease), as it registered"`
	WorkerIP   string    `json:"worker_ip,omitempty" doc:"IP of that agent's host, as it registered"`
	Stream     string    `json:"stream,omitempty"`
	Message    string    `json:"message,omitempty" doc:"Output (log) or reason (state)"`
	At         time.Time `json:"at"`
}

type executionLogsOutput struct {
	Body struct {
		Events    []TaskEvent `json:"events"`
		NextAfter int64       `json:"next_after" doc:"Pass as after to read on: the last event's id (after itself when none came)"`
		More      bool        `json:"more" doc:"The page stopped at limit or at its 4 MiB bound on messages: ask again at once with after=next_after"`
	}
}

func (h *executionHandlers) registerLogs(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "get-execution-logs", Method: http.MethodGet, Path: "/v1/executions/{id}/logs", Tags: []string{"Executions"},
		Summary: "An execution's task events and output",
		Description: "State changes and log chunks of every task, oldest first. Poll with after= to follow. " +
			"A page holds at most limit events and stops once their messages pass 4 MiB (the first event always comes): " +
			"when more is true, read on at once with after=next_after. A task's stored output stops at the server's cap " +
			"(1 MiB by default), marked by one event on stream ax.",
		Errors: []int{http.StatusNotFound},
	}, ScopeRead), h.logs)
}

func (h *executionHandlers) logs(ctx context.Context, in *executionLogsInput) (*executionLogsOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.execution(ctx, id); err != nil {
		return nil, err
	}
	page, err := h.execs.Events(ctx, id, in.After, axtype.TaskEventKind(in.Kind), in.Limit)
	if err != nil {
		return nil, executionError(err)
	}
	out := &executionLogsOutput{}
	out.Body.NextAfter, out.Body.More = page.NextAfter, page.More
	out.Body.Events = make([]TaskEvent, 0, len(page.Events))
	for _, e := range page.Events {
		ev := TaskEvent{ID: e.ID, TaskID: e.TaskID.String(), ShardIndex: e.ShardIndex, Attempt: e.Attempt,
			Kind: string(e.Kind), State: string(e.State), Stream: e.Stream, Message: e.Message, At: e.At,
			WorkerHost: e.WorkerHost, WorkerIP: e.WorkerIP}
		if e.AgentID != nil {
			ev.AgentID = e.AgentID.String()
		}
		out.Body.Events = append(out.Body.Events, ev)
	}
	return out, nil
}
