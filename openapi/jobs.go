package openapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

type jobHandlers struct {
	jobs  *queue.JobService
	urls  *urlChecker
	guard groupGuard
}

// jobBodyLimit bounds a job definition or a run: params at their limit
// and the rest of a definition (a command and a body template may take
// 64 KiB each), so params past theirs are refused naming the field.
const jobBodyLimit = MaxParamsBytes + 256<<10

type jobIDInput struct {
	ID string `path:"id" format:"uuid" doc:"Job id"`
}

type jobBodyInput struct {
	Body Job
}

type jobUpdateInput struct {
	ID    string `path:"id" format:"uuid" doc:"Job id"`
	Force bool   `query:"force" doc:"Change a job that a declaration set manages (managed_by) all the same; its next declaration puts its definition back"`
	Body  Job
}

type jobDeleteInput struct {
	ID    string `path:"id" format:"uuid" doc:"Job id"`
	Force bool   `query:"force" doc:"Delete a job that a declaration set manages (managed_by) all the same; its next declaration creates it again"`
}

type jobOutput struct {
	Body *Job
}

type jobCreatedOutput struct {
	Location string `header:"Location" doc:"URL of the new job"`
	Body     *Job
}

type jobListInput struct {
	Group  string `query:"group" maxLength:"200" doc:"Only jobs of this group"`
	Name   string `query:"name" maxLength:"200" doc:"Only jobs with this name (one per group): how the CLI finds a job by group/name"`
	Owner  string `query:"owner" maxLength:"200" doc:"Only jobs of this owner"`
	Paused string `query:"paused" enum:"true,false" doc:"Only paused (true) or unpaused (false) jobs"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100" doc:"Page size"`
	Cursor string `query:"cursor" maxLength:"100" doc:"next_cursor of the previous page"`
}

// JobList is one page of jobs.
type JobList struct {
	Jobs       []*Job `json:"jobs"`
	NextCursor string `json:"next_cursor,omitempty" doc:"Pass as cursor to get the next page; absent on the last page"`
}

type jobListOutput struct {
	Body JobList
}

func (h *jobHandlers) register(api huma.API) {
	tags := []string{"Jobs"}
	h.registerGraph(api)
	register(api, showsSecret(requireScope(huma.Operation{
		OperationID: "create-job", Method: http.MethodPost, Path: "/v1/jobs", Tags: tags,
		Summary: "Create a job", DefaultStatus: http.StatusCreated, MaxBodyBytes: jobBodyLimit,
		Description: "Validates the definition, stores it and computes its first fire time from the database clock.",
		Errors:      []int{http.StatusConflict, http.StatusUnprocessableEntity},
	}, ScopeSubmit), "signing_secret"), h.create)
	register(api, requireScope(huma.Operation{
		OperationID: "list-jobs", Method: http.MethodGet, Path: "/v1/jobs", Tags: tags,
		Summary: "List jobs", Description: "Pages in creation order; filter by group, owner and paused.",
	}, ScopeRead), h.list)
	register(api, requireScope(huma.Operation{
		OperationID: "get-job", Method: http.MethodGet, Path: "/v1/jobs/{id}", Tags: tags,
		Summary: "Get a job", Errors: []int{http.StatusNotFound},
		Description: "The job's definition with its next fire time; what GET returns may be sent back with PUT unchanged (read-only fields are ignored).",
	}, ScopeRead), h.get)
	register(api, requireScope(huma.Operation{
		OperationID: "update-job", Method: http.MethodPut, Path: "/v1/jobs/{id}", Tags: tags,
		Summary: "Replace a job's definition", MaxBodyBytes: jobBodyLimit,
		Description: "Read-only fields are ignored. The next fire time is recomputed only when the trigger changed. " +
			"PATCH with a JSON merge patch changes single fields. A job managed by a declaration set (managed_by) " +
			"is refused with 409 naming the set and where it is declared, unless ?force=true.",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.update)
	register(api, requireScope(huma.Operation{
		OperationID: "pause-job", Method: http.MethodPost, Path: "/v1/jobs/{id}/pause", Tags: tags,
		Summary: "Pause a job", Description: "A paused job does not fire. Pausing twice is harmless.",
		Errors: []int{http.StatusNotFound},
	}, ScopeSubmit), h.pause)
	register(api, requireScope(huma.Operation{
		OperationID: "resume-job", Method: http.MethodPost, Path: "/v1/jobs/{id}/resume", Tags: tags,
		Summary:     "Resume a paused job",
		Description: "Fires that fell due while paused are handled under the job's misfire policy.",
		Errors:      []int{http.StatusNotFound},
	}, ScopeSubmit), h.resume)
	register(api, requireScope(huma.Operation{
		OperationID: "delete-job", Method: http.MethodDelete, Path: "/v1/jobs/{id}", Tags: tags,
		Summary: "Delete a job", DefaultStatus: http.StatusNoContent, Errors: []int{http.StatusNotFound, http.StatusConflict},
		Description: "A job managed by a declaration set (managed_by) is refused with 409 unless ?force=true.",
	}, ScopeSubmit), h.delete)
	h.registerShardPreview(api)
}

func (h *jobHandlers) create(ctx context.Context, in *jobBodyInput) (*jobCreatedOutput, error) {
	if err := h.urls.check(ctx, &in.Body); err != nil {
		return nil, err
	}
	def, err := jobToDB(&in.Body, uuid.Nil)
	if err != nil {
		return nil, err
	}
	if err := queue.RestoreWriteOnly(def, nil); err != nil {
		return nil, jobError(err, &in.Body)
	}
	if err := writable(ctx, def.Group, "body.group"); err != nil {
		return nil, err
	}
	if err := h.guard.class(ctx, def.RateLimitClass, "body.rate_limit_class"); err != nil {
		return nil, err
	}
	if err := upstreamsVisible(ctx, def); err != nil {
		return nil, err
	}
	job, err := h.jobs.Create(ctx, def)
	if err != nil {
		return nil, jobError(err, &in.Body)
	}
	out, err := jobFromDB(job)
	if err != nil {
		return nil, err
	}
	return &jobCreatedOutput{Location: "/v1/jobs/" + out.ID, Body: out}, nil
}

func (h *jobHandlers) list(ctx context.Context, in *jobListInput) (*jobListOutput, error) {
	p := &queue.JobListParams{Limit: in.Limit + 1}
	if in.Cursor != "" {
		after, err := decodeCursor(in.Cursor)
		if err != nil {
			return nil, invalidCursor(in.Cursor)
		}
		p.After = &after
	}
	if in.Group != "" {
		p.Group = &in.Group
	}
	if groups := keyGroups(ctx); groups != nil {
		if in.Group != "" && !allows(ctx, in.Group) {
			return &jobListOutput{Body: JobList{Jobs: []*Job{}}}, nil
		}
		p.Groups = groups
	}
	if in.Owner != "" {
		p.Owner = &in.Owner
	}
	if in.Name != "" {
		p.Name = &in.Name
	}
	if in.Paused != "" {
		paused := in.Paused == "true"
		p.Paused = &paused
	}
	jobs, err := h.jobs.List(ctx, p)
	if err != nil {
		return nil, err
	}
	out := &jobListOutput{Body: JobList{Jobs: make([]*Job, 0, len(jobs))}}
	if len(jobs) > in.Limit {
		jobs = jobs[:in.Limit]
		out.Body.NextCursor = encodeCursor(jobs[len(jobs)-1].ID)
	}
	for _, j := range jobs {
		aj, err := jobFromDB(j)
		if err != nil {
			return nil, err
		}
		out.Body.Jobs = append(out.Body.Jobs, aj)
	}
	return out, nil
}

func (h *jobHandlers) get(ctx context.Context, in *jobIDInput) (*jobOutput, error) {
	id, err := h.visible(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return h.respond(h.jobs.Get(ctx, id))
}

func (h *jobHandlers) update(ctx context.Context, in *jobUpdateInput) (*jobOutput, error) {
	id, err := h.visible(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.urls.check(ctx, &in.Body); err != nil {
		return nil, err
	}
	def, err := jobToDB(&in.Body, id)
	if err != nil {
		return nil, err
	}
	if err := h.keepWriteOnly(ctx, def); err != nil {
		return nil, jobError(err, &in.Body)
	}
	if err := writable(ctx, def.Group, "body.group"); err != nil {
		return nil, err
	}
	if err := h.guard.classKept(ctx, id, def.RateLimitClass, "body.rate_limit_class"); err != nil {
		return nil, err
	}
	if err := upstreamsVisible(ctx, def); err != nil {
		return nil, err
	}
	job, err := h.jobs.Update(ctx, def, in.Force)
	if err != nil {
		return nil, jobError(err, &in.Body)
	}
	return h.respond(job, nil)
}

// keepWriteOnly puts the stored job's write-only values (header values,
// URL credentials) where def carries the placeholder GET showed.
func (h *jobHandlers) keepWriteOnly(ctx context.Context, def *axtype.Job) error {
	stored, err := h.jobs.Get(ctx, def.ID)
	if err != nil {
		return err
	}
	return queue.RestoreWriteOnly(def, stored)
}

func (h *jobHandlers) pause(ctx context.Context, in *jobIDInput) (*jobOutput, error) {
	id, err := h.visible(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return h.respond(h.jobs.Pause(ctx, id))
}

func (h *jobHandlers) resume(ctx context.Context, in *jobIDInput) (*jobOutput, error) {
	id, err := h.visible(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	return h.respond(h.jobs.Resume(ctx, id))
}

func (h *jobHandlers) delete(ctx context.Context, in *jobDeleteInput) (*struct{}, error) {
	id, err := h.visible(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.jobs.Delete(ctx, id, in.Force); err != nil {
		return nil, jobError(err, nil)
	}
	return nil, nil
}

// visible parses a job id and answers 404 when the caller's key may not
// see the job (it is limited to other groups).
func (h *jobHandlers) visible(ctx context.Context, raw string) (uuid.UUID, error) {
	id, err := parseID(raw)
	if err != nil {
		return uuid.Nil, err
	}
	return id, h.guard.job(ctx, id)
}

func (h *jobHandlers) respond(job *axtype.Job, err error) (*jobOutput, error) {
	if err != nil {
		return nil, jobError(err, nil)
	}
	out, err := jobFromDB(job)
	if err != nil {
		return nil, err
	}
	return &jobOutput{Body: out}, nil
}

// jobError turns service errors into problem responses.
func jobError(err error, in *Job) error {
	return jobErrorAt(err, in, "body.")
}

// jobErrorAt is jobError for a job whose fields are under prefix
// ("body.", "body.jobs[2].").
func jobErrorAt(err error, in *Job, prefix string) error {
	var ce *axtype.ConstraintError
	var managed *queue.ManagedJobError
	var writeOnly *queue.WriteOnlyError
	var invalid *axtype.InvalidError
	var upstream *axtype.AfterUpstreamError
	switch {
	case errors.As(err, &invalid): // Resolve checks the same rules: reached by a path that skipped it
		details := make([]error, len(invalid.Fields))
		for i, f := range invalid.Fields {
			details[i] = &huma.ErrorDetail{Location: prefix + f.Field, Message: f.Message, Value: f.Value}
		}
		return huma.Error422UnprocessableEntity("validation failed", details...)
	case errors.As(err, &upstream):
		loc := prefix + "trigger.upstream"
		if upstream.Index >= 0 {
			loc = fmt.Sprintf("%s[%d].job", loc, upstream.Index)
		}
		return huma.Error422UnprocessableEntity("invalid upstream jobs",
			&huma.ErrorDetail{Location: loc, Message: upstream.Reason})
	case errors.As(err, &writeOnly):
		return huma.Error422UnprocessableEntity("a write-only value is missing",
			&huma.ErrorDetail{Location: prefix + writeOnly.Field, Message: writeOnly.Error(), Value: writeOnly.Value})
	case errors.As(err, &managed):
		return managedJobError(managed)
	case errors.Is(err, axtype.ErrNotFound):
		return huma.Error404NotFound("job not found")
	case errors.Is(err, axtype.ErrConflict) && in != nil:
		return huma.Error409Conflict(fmt.Sprintf("a job named %q already exists in group %q", in.Name, in.Group),
			&huma.ErrorDetail{Location: prefix + "name", Message: "is taken in this group", Value: in.Name})
	case errors.As(err, &ce) && ce.Constraint == "job_calendar_calendar_fk" && in != nil:
		return jobExcludeError(ce.Detail, in, prefix)
	case errors.As(err, &ce) && ce.Constraint == "job_rate_class_groups" && in != nil:
		return huma.Error422UnprocessableEntity("the rate class is kept to other job groups",
			&huma.ErrorDetail{Location: prefix + "rate_limit_class", Message: "is not open to this job's group (the class's groups list who may name it)",
				Value: in.RateLimitClass})
	case errors.As(err, &ce) && ce.Constraint == "job_rate_limit_class_fk" && in != nil:
		return huma.Error422UnprocessableEntity("unknown rate class",
			&huma.ErrorDetail{Location: prefix + "rate_limit_class", Message: "names no rate class: create it first (POST /v1/classes)",
				Value: in.RateLimitClass})
	case errors.As(err, &ce):
		return huma.Error422UnprocessableEntity("the job breaks rule "+ce.Constraint,
			&huma.ErrorDetail{Location: strings.TrimSuffix(prefix, "."), Message: "violates " + ce.Constraint})
	}
	return err
}

// managedJobError refuses an API change of a declared job, saying where
// to make it instead.
func managedJobError(e *queue.ManagedJobError) error {
	where := ""
	if e.DeclaredIn != "" {
		where = " in " + e.DeclaredIn
	}
	return huma.Error409Conflict(fmt.Sprintf("%s: change it where it is declared%s, or pass ?force=true "+
		"(the next declaration of %s puts it back)", e.Error(), where, e.ManagedBy),
		&huma.ErrorDetail{Location: "path.id", Message: "is managed by " + e.ManagedBy, Value: e.JobID.String()})
}

func parseID(s string) (uuid.UUID, error) {
	id, err := uuid.Parse(s)
	if err != nil {
		return uuid.Nil, huma.Error422UnprocessableEntity("invalid id",
			&huma.ErrorDetail{Location: "path.id", Message: "must be a UUID", Value: s})
	}
	return id, nil
}

// Cursors are opaque to clients so the paging key can change later.
func encodeCursor(id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// invalidCursor is the problem of a cursor this API did not return.
func invalidCursor(cursor string) error {
	return huma.Error422UnprocessableEntity("invalid cursor",
		&huma.ErrorDetail{Location: "query.cursor", Message: "is not a cursor returned by this API", Value: cursor})
}

func decodeCursor(s string) (uuid.UUID, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return uuid.Nil, err
	}
	return uuid.FromBytes(b)
}
