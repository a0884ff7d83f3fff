package openapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// runBatchBodyLimit bounds a batch: 1,000 runs of 8 KiB on average.
const runBatchBodyLimit = 8 << 20

// BatchRun is one run of a batch: a job to run later (or now), as the
// trigger call of that job would ask for it.
type BatchRun struct {
	JobID    string `json:"job_id" format:"uuid" doc:"The job to run"`
	Params   Params `json:"params,omitempty" doc:"Overlay the job's params for this run: a JSON object of at most 256 KiB, nesting at most 64 levels, kept exactly"`
	Priority *int   `json:"priority,omitempty" minimum:"-1000" maximum:"1000" doc:"Run at this priority instead of the job's"`
	RunLater
	IdempotencyKey string `json:"idempotency_key,omitempty" maxLength:"255" doc:"As the Idempotency-Key header of the job's trigger call: the same key and run is not stored twice (the answer says replayed); the same key with another run fails the batch (422). Cancel the run with it (POST /v1/runs/cancel) until a day after its run_at"`
}

// RunBatch is up to 1,000 runs stored in one transaction.
type RunBatch struct {
	Runs []BatchRun `json:"runs" minItems:"1" maxItems:"1000"`
}

// Resolve checks each run as its trigger call would be checked, naming
// the run by its index.
func (b *RunBatch) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	seen := make(map[string]int, len(b.Runs))
	base := prefix.String()
	for i := range b.Runs {
		r := &b.Runs[i]
		at := func(field string) string { return fmt.Sprintf("%s.runs[%d].%s", base, i, field) }
		r.Params.validate(at("params"), &errs)
		if r.RunAt != nil && r.DelaySeconds != nil {
			errs.add(at("delay_seconds"), "set run_at or delay_seconds, not both", *r.DelaySeconds)
		}
		if r.RunAt != nil && r.RunAt.After(time.Now().Add(queue.MaxRunDelay)) {
			errs.add(at("run_at"), "must be at most 400 days ahead", r.RunAt)
		}
		if r.IdempotencyKey != "" {
			if j, dup := seen[r.IdempotencyKey]; dup {
				errs.add(at("idempotency_key"), fmt.Sprintf("repeats runs[%d].idempotency_key", j), r.IdempotencyKey)
			}
			seen[r.IdempotencyKey] = i
		}
	}
	return errs
}

// ScheduledRunRef is what one run of a batch became.
type ScheduledRunRef struct {
	ID        string    `json:"id" format:"uuid" doc:"The run: the id of its execution once it fires"`
	JobID     string    `json:"job_id" format:"uuid"`
	RunAt     time.Time `json:"run_at" doc:"When it fires (now, for a run without run_at or delay_seconds)"`
	Replayed  bool      `json:"replayed,omitempty" doc:"Its idempotency_key was used before for the same run: this is that run, not a new one"`
	StatusURL string    `json:"status_url"`
}

type runBatchInput struct {
	Body RunBatch
}

type runBatchOutput struct {
	Body struct {
		Runs []ScheduledRunRef `json:"runs" doc:"In the order of the request"`
	}
}

// RunCancelRequest names delayed runs by the Idempotency-Keys they were
// created with.
type RunCancelRequest struct {
	IdempotencyKeys []string `json:"idempotency_keys" minItems:"1" maxItems:"1000" doc:"Keys given when the runs were created (header or idempotency_key), by this API key"`
	Reason          string   `json:"reason,omitempty" maxLength:"500" doc:"Recorded on the cancelled runs"`
}

// Resolve bounds each key.
func (r *RunCancelRequest) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	for i, k := range r.IdempotencyKeys {
		if k == "" || len(k) > 255 {
			errs.add(fmt.Sprintf("%s.idempotency_keys[%d]", prefix.String(), i), "must be 1 to 255 bytes", len(k))
		}
	}
	return errs
}

// RunCancelResult is what became of one key's run.
type RunCancelResult struct {
	IdempotencyKey string `json:"idempotency_key"`
	ID             string `json:"id,omitempty" format:"uuid" doc:"The run (absent when not found)"`
	State          string `json:"state" enum:"cancelled,fired,not_found" doc:"cancelled: it will not fire (also when cancelled before); fired: too late, it is an execution now (cancel that by id if it should stop); not_found: no run was created with this key by this API key, or its key expired"`
}

type runCancelInput struct {
	Body RunCancelRequest
}

type runCancelOutput struct {
	Body struct {
		Results []RunCancelResult `json:"results" doc:"In the order of the request"`
	}
}

type scheduledListInput struct {
	ID     string `path:"id" format:"uuid" doc:"Job id"`
	Limit  int    `query:"limit" minimum:"1" maximum:"1000" default:"100"`
	Cursor string `query:"cursor" maxLength:"100" doc:"next_cursor of the previous page"`
}

type scheduledListOutput struct {
	Body struct {
		Runs       []*Execution `json:"runs" doc:"Scheduled runs, earliest first (state scheduled; held ones wait for the job's resume)"`
		NextCursor string       `json:"next_cursor,omitempty" doc:"Pass as cursor for the next page; absent on the last"`
	}
}

func (h *executionHandlers) registerDelayed(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "submit-run-batch", Method: http.MethodPost, Path: "/v1/runs/batch", Tags: []string{"Executions"},
		Summary: "Schedule up to 1,000 runs of jobs at once", DefaultStatus: http.StatusAccepted,
		MaxBodyBytes: runBatchBodyLimit, BodyReadTimeout: largeBodyReadTimeout,
		Description: "Each run is a run of an existing job, now or later (run_at, delay_seconds), as its trigger call would ask: " +
			"\"close this order in 30 minutes\" is one run per order. All runs are stored in one transaction, or none " +
			"(a problem names the run by index). They fire like cron ticks, under their job's misfire and concurrency policies, " +
			"as executions with the ids answered here. Cancel them by id or by idempotency_key (POST /v1/runs/cancel).",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.runBatch)
	register(api, requireScope(huma.Operation{
		OperationID: "cancel-runs-by-key", Method: http.MethodPost, Path: "/v1/runs/cancel", Tags: []string{"Executions"},
		Summary:     "Cancel scheduled runs by their Idempotency-Keys",
		Description: "\"The order was paid\": each scheduled run created with one of the keys (by this API key) is cancelled before it fires. Each key costs two primary-key lookups, however many runs wait. A run that fired already is answered fired, with its execution id.",
		Errors:      []int{http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.cancelRunsByKey)
	register(api, requireScope(huma.Operation{
		OperationID: "list-scheduled-runs", Method: http.MethodGet, Path: "/v1/jobs/{id}/scheduled", Tags: []string{"Jobs"},
		Summary: "List a job's scheduled (delayed) runs", Errors: []int{http.StatusNotFound},
		Description: "Runs made for later (run_at or delay) that have not fired yet, earliest first, a page at a time (next_cursor).",
	}, ScopeRead), h.listScheduled)
}

func (h *executionHandlers) runBatch(ctx context.Context, in *runBatchInput) (*runBatchOutput, error) {
	keyID, _, err := requestIdentity(ctx, nil)
	if err != nil {
		return nil, err
	}
	checked := map[uuid.UUID]bool{}
	reqs := make([]*queue.DelayedRunRequest, len(in.Body.Runs))
	for i := range in.Body.Runs {
		r := &in.Body.Runs[i]
		jobID, err := uuid.Parse(r.JobID)
		if err != nil {
			return nil, huma.Error422UnprocessableEntity("invalid job_id",
				&huma.ErrorDetail{Location: fmt.Sprintf("body.runs[%d].job_id", i), Message: "must be a UUID", Value: r.JobID})
		}
		if !checked[jobID] {
			if err := h.guard.job(ctx, jobID); err != nil {
				return nil, batchItemError(&queue.BatchItemError{Index: i, Field: "job_id", Err: axtype.ErrNotFound}, in)
			}
			checked[jobID] = true
		}
		trigger := &queue.TriggerRequest{JobID: jobID, Priority: r.Priority, APIKeyID: keyID,
			IdempotencyKey: r.IdempotencyKey, Method: http.MethodPost, Path: "/v1/jobs/" + jobID.String() + "/trigger"}
		if r.Params != nil {
			trigger.Params = []byte(r.Params)
		}
		if r.IdempotencyKey != "" {
			// Hashed as the job's trigger call with this body: the same
			// key and run, sent either way, is the same request.
			if trigger.RequestHash, err = bodyHash(&TriggerRequest{Params: r.Params, Priority: r.Priority, RunLater: r.RunLater}); err != nil {
				return nil, err
			}
		}
		when := time.Now().UTC()
		if w := r.when(); w != nil {
			when = *w
		}
		reqs[i] = &queue.DelayedRunRequest{TriggerRequest: trigger, RunAt: when}
	}
	res, err := h.execs.ScheduleBatch(ctx, reqs)
	if err != nil {
		return nil, batchItemError(err, in)
	}
	out := &runBatchOutput{}
	out.Body.Runs = make([]ScheduledRunRef, len(res))
	for i, r := range res {
		out.Body.Runs[i] = ScheduledRunRef{ID: r.ID.String(), JobID: r.JobID.String(), RunAt: r.RunAt,
			Replayed: r.Replayed, StatusURL: "/v1/executions/" + r.ID.String()}
	}
	return out, nil
}

// batchItemError names the run at fault.
func batchItemError(err error, in *runBatchInput) error {
	var item *queue.BatchItemError
	if !errors.As(err, &item) {
		return err
	}
	loc := fmt.Sprintf("body.runs[%d].%s", item.Index, item.Field)
	run := in.Body.Runs[item.Index]
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		return huma.Error422UnprocessableEntity("unknown job",
			&huma.ErrorDetail{Location: loc, Message: "names no job (that this key may see)", Value: run.JobID})
	case errors.Is(err, queue.ErrIdempotencyMismatch):
		return huma.Error422UnprocessableEntity("idempotency_key was used for a different request",
			&huma.ErrorDetail{Location: loc, Message: "was used before with another run", Value: run.IdempotencyKey})
	}
	return huma.Error422UnprocessableEntity("invalid run",
		&huma.ErrorDetail{Location: loc, Message: item.Err.Error(), Value: run.IdempotencyKey})
}

func (h *executionHandlers) cancelRunsByKey(ctx context.Context, in *runCancelInput) (*runCancelOutput, error) {
	keyID, _, err := requestIdentity(ctx, nil)
	if err != nil {
		return nil, err
	}
	reason := in.Body.Reason
	if reason == "" {
		reason = "cancelled through the API"
	}
	res, err := h.execs.CancelRunsByKey(ctx, keyID, in.Body.IdempotencyKeys, reason)
	if err != nil {
		return nil, err
	}
	out := &runCancelOutput{}
	out.Body.Results = make([]RunCancelResult, len(res))
	for i, r := range res {
		out.Body.Results[i] = RunCancelResult{IdempotencyKey: r.Key, State: r.State}
		if r.ID != uuid.Nil {
			out.Body.Results[i].ID = r.ID.String()
		}
	}
	return out, nil
}

func (h *executionHandlers) listScheduled(ctx context.Context, in *scheduledListInput) (*scheduledListOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	afterAt, afterID := time.Time{}, uuid.Nil
	if in.Cursor != "" {
		if afterAt, afterID, err = decodeRunCursor(in.Cursor); err != nil {
			return nil, invalidCursor(in.Cursor)
		}
	}
	runs, err := h.execs.ScheduledRuns(ctx, id, afterAt, afterID, in.Limit+1)
	if err != nil {
		return nil, jobError(err, nil)
	}
	out := &scheduledListOutput{}
	if len(runs) > in.Limit {
		runs = runs[:in.Limit]
		last := runs[len(runs)-1]
		out.Body.NextCursor = encodeRunCursor(last.RunAt, last.ID)
	}
	out.Body.Runs = make([]*Execution, len(runs))
	for i, r := range runs {
		out.Body.Runs[i] = executionFromScheduled(r)
	}
	return out, nil
}

func encodeRunCursor(at time.Time, id uuid.UUID) string {
	return base64.RawURLEncoding.EncodeToString([]byte(at.UTC().Format(time.RFC3339Nano) + "|" + id.String()))
}

func decodeRunCursor(s string) (time.Time, uuid.UUID, error) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	at, id, ok := strings.Cut(string(b), "|")
	if !ok {
		return time.Time{}, uuid.Nil, errors.New("no separator")
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return time.Time{}, uuid.Nil, err
	}
	u, err := uuid.Parse(id)
	return t, u, err
}
