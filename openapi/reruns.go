package openapi

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// RerunRequest is the optional body of a re-run call.
type RerunRequest struct {
	Shards     string `json:"shards,omitempty" enum:"all,failed" default:"all" doc:"all: every shard of the run again; failed: only the shards that did not succeed (same shard index and param)"`
	Params     Params `json:"params,omitempty" doc:"Overlay the original run's params: a JSON object of at most 256 KiB, nesting at most 64 levels"`
	Priority   *int   `json:"priority,omitempty" minimum:"-1000" maximum:"1000" doc:"Run at this priority instead of the original's"`
	Cascade    bool   `json:"cascade,omitempty" doc:"When the re-run ends, fire the jobs that run after its job (trigger kind after) again for its logical time, as its outcome decides (a downstream that ran is re-run, cascading in turn). Default false: downstream jobs are left as they are"`
	RequestKey string `json:"request_key,omitempty" maxLength:"200" doc:"The re-run is made once per (run, key): a retry with the same key answers with the run the first call made. Defaults to the Idempotency-Key header, else to a hash of this body, so a retried call never doubles the run; pass a new key to re-run the same run again"`
}

// Resolve bounds the params' nesting.
func (r *RerunRequest) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	r.Params.validate(prefix.With("params"), &errs)
	return errs
}

type rerunInput struct {
	ID             string        `path:"id" format:"uuid" doc:"Execution id of the run to re-run"`
	IdempotencyKey string        `header:"Idempotency-Key" maxLength:"200" doc:"The request key, when the body names none"`
	TraceParent    string        `header:"traceparent" maxLength:"55" doc:"W3C trace context the re-run joins"`
	Body           *RerunRequest `required:"false"`
}

// BulkRerunRequest selects ended runs to re-run.
type BulkRerunRequest struct {
	JobID      string     `json:"job_id,omitempty" format:"uuid" doc:"Only runs of this job"`
	Group      string     `json:"group,omitempty" maxLength:"200" doc:"Only runs of jobs of this group"`
	States     []string   `json:"states,omitempty" maxItems:"4" enum:"failed,timed_out,cancelled,succeeded" doc:"Only runs that ended in one of these states; default failed and timed_out"`
	ErrorCodes []string   `json:"error_codes,omitempty" maxItems:"50" doc:"Only runs with a shard that ended with one of these error codes (exit_3, http_503…)"`
	From       *time.Time `json:"from,omitempty" doc:"Only runs scheduled at or after this instant"`
	To         *time.Time `json:"to,omitempty" doc:"Only runs scheduled before this instant"`
	Shards     string     `json:"shards,omitempty" enum:"all,failed" default:"all" doc:"Which shards of each run to run again"`
	Max        int        `json:"max,omitempty" minimum:"1" maximum:"1000" default:"100" doc:"The cap: at most this many runs (oldest first), and no more once the re-runs made 50,000 tasks (the one that passes it is made whole); truncated says more matched"`
	DryRun     bool       `json:"dry_run,omitempty" doc:"List what would be re-run and change nothing"`
	RequestKey string     `json:"request_key,omitempty" maxLength:"200" doc:"Each run is re-run once per key, so a retried bulk call re-runs nothing twice. Defaults to the Idempotency-Key header, else to a hash of this body"`
}

// Resolve checks the filter: a job or a group, and codes of the error code
// format.
func (r *BulkRerunRequest) Resolve(_ huma.Context, prefix *huma.PathBuffer) []error {
	var errs fieldErrors
	if r.JobID == "" && r.Group == "" {
		errs.add(prefix.With("job_id"), "name a job_id or a group to re-run runs of", r.JobID)
	}
	for i, c := range r.ErrorCodes {
		if !axtype.ValidErrorCode(c) {
			errs.add(prefix.With("error_codes")+"["+strconv.Itoa(i)+"]", "must match ^[a-z0-9_.-]{1,64}$", c)
		}
	}
	if r.From != nil && r.To != nil && !r.From.Before(*r.To) {
		errs.add(prefix.With("to"), "must be after from", r.To)
	}
	return errs
}

type bulkRerunInput struct {
	IdempotencyKey string           `header:"Idempotency-Key" maxLength:"200" doc:"The request key, when the body names none"`
	Body           BulkRerunRequest `required:"true"`
}

// BulkRerunItem is one selected run and its re-run.
type BulkRerunItem struct {
	ExecutionID  string    `json:"execution_id" format:"uuid" doc:"The run selected"`
	JobID        string    `json:"job_id" format:"uuid"`
	State        string    `json:"state"`
	ScheduledFor time.Time `json:"scheduled_for"`
	RerunID      string    `json:"rerun_id,omitempty" format:"uuid" doc:"Its re-run (absent in a dry run)"`
	Replayed     bool      `json:"replayed,omitempty" doc:"An earlier call with the same request key made this re-run"`
	Error        string    `json:"error,omitempty" doc:"Why it was not re-run"`
}

type bulkRerunOutput struct {
	Body struct {
		DryRun     bool            `json:"dry_run"`
		RequestKey string          `json:"request_key" doc:"The key the re-runs were made under: send it again to retry safely"`
		Runs       []BulkRerunItem `json:"runs"`
		Truncated  bool            `json:"truncated" doc:"More runs matched than max, or the re-runs made reached 50,000 tasks first: call again with the same request key to go on"`
	}
}

func (h *executionHandlers) registerReruns(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "rerun-execution", Method: http.MethodPost, Path: "/v1/executions/{id}/rerun", Tags: []string{"Executions"},
		Summary: "Re-run an ended run", DefaultStatus: http.StatusAccepted, MaxBodyBytes: jobBodyLimit,
		Description: "Makes a new execution (cause rerun) of the run's job with its params (overlaid by params) and its " +
			"logical time (scheduled_for), linked both ways (rerun_of on the new run, reruns on the original, which is " +
			"not changed). shards=failed runs only the shards that did not succeed, with the same shard index and param. " +
			"Once per (run, request key): a retried call answers with the same run. 409 while the run is unfinished, " +
			"when every shard succeeded and shards=failed, or when the job forbids overlap and has a run unfinished. " +
			"A job whose concurrency policy is queue makes the re-run wait behind its unfinished run (409 when one waits already).",
		Errors: []int{http.StatusNotFound, http.StatusConflict, http.StatusGone, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.rerun)
	register(api, requireScope(huma.Operation{
		OperationID: "rerun-executions", Method: http.MethodPost, Path: "/v1/executions/rerun", Tags: []string{"Executions"},
		Summary: "Re-run the ended runs a filter selects",
		Description: "Selects ended runs of a job or group by state, error code and scheduled time, oldest first, at most max; " +
			"dry_run lists them and changes nothing. Each is re-run as POST /v1/executions/{id}/rerun does, once per " +
			"(run, request key), so a retried call re-runs nothing twice.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.rerunMany)
}

func (h *executionHandlers) rerun(ctx context.Context, in *rerunInput) (*executionAcceptedOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.execution(ctx, id); err != nil {
		return nil, err
	}
	body := in.Body
	if body == nil {
		body = &RerunRequest{}
	}
	key, err := requestKey(body.RequestKey, in.IdempotencyKey, body)
	if err != nil {
		return nil, err
	}
	req := &queue.RerunRequest{ExecutionID: id, Shards: axtype.RerunShards(body.Shards), Priority: body.Priority, RequestKey: key,
		Cascade: body.Cascade}
	if body.Params != nil {
		req.Params = json.RawMessage(body.Params)
	}
	if ValidTraceParent(in.TraceParent) {
		req.TraceParent = in.TraceParent
	}
	res, err := h.execs.Rerun(ctx, req)
	if err != nil {
		return nil, rerunError(err)
	}
	out, err := executionFromDB(res.Execution, res.Tasks)
	if err != nil {
		return nil, err
	}
	out.RerunOf = id.String()
	return &executionAcceptedOutput{Location: out.StatusURL, Body: out}, nil
}

// requestKey is the re-run's key: the body's, else the Idempotency-Key,
// else a hash of the body (a retry of the same call gets the same).
func requestKey(given, header string, body any) (string, error) {
	switch {
	case given != "":
		return given, nil
	case header != "":
		return header, nil
	}
	sum, err := bodyHash(body)
	if err != nil {
		return "", err
	}
	return "body:" + hex.EncodeToString(sum[:16]), nil
}

func rerunError(err error) error {
	switch {
	case errors.Is(err, queue.ErrRunUnfinished), errors.Is(err, axtype.ErrNothingToRerun), errors.Is(err, queue.ErrOverlapForbidden),
		errors.Is(err, queue.ErrOverlapQueueFull):
		return huma.Error409Conflict(err.Error())
	}
	return executionError(err)
}

func (h *executionHandlers) rerunMany(ctx context.Context, in *bulkRerunInput) (*bulkRerunOutput, error) {
	b := &in.Body
	f := queue.RerunFilter{ErrorCodes: b.ErrorCodes, From: b.From, To: b.To, Limit: b.Max, Groups: keyGroups(ctx)}
	if b.JobID != "" {
		id, err := uuid.Parse(b.JobID)
		if err != nil {
			return nil, huma.Error422UnprocessableEntity("invalid job_id",
				&huma.ErrorDetail{Location: "body.job_id", Message: "must be a UUID", Value: b.JobID})
		}
		if err := h.guard.job(ctx, id); err != nil {
			return nil, err
		}
		f.JobID = &id
	}
	if b.Group != "" {
		f.Group = &b.Group
	}
	for _, s := range b.States {
		f.States = append(f.States, axtype.ExecutionState(s))
	}
	if len(f.States) == 0 {
		f.States = []axtype.ExecutionState{axtype.ExecutionFailed, axtype.ExecutionTimedOut}
	}
	key, err := requestKey(b.RequestKey, in.IdempotencyKey, b)
	if err != nil {
		return nil, err
	}
	res, err := h.execs.BulkRerun(ctx, &queue.BulkRerunRequest{Filter: f, Shards: axtype.RerunShards(b.Shards),
		RequestKey: key, DryRun: b.DryRun})
	if err != nil {
		return nil, err
	}
	out := &bulkRerunOutput{}
	out.Body.DryRun, out.Body.RequestKey, out.Body.Truncated = b.DryRun, key, res.Truncated
	out.Body.Runs = make([]BulkRerunItem, 0, len(res.Items))
	for _, it := range res.Items {
		item := BulkRerunItem{ExecutionID: it.Original.ID.String(), JobID: it.Original.JobID.String(),
			State: string(it.Original.State), ScheduledFor: it.Original.ScheduledFor, Replayed: it.Replayed, Error: it.Error}
		if it.RerunID != uuid.Nil {
			item.RerunID = it.RerunID.String()
		}
		out.Body.Runs = append(out.Body.Runs, item)
	}
	return out, nil
}

// showLineage fills in how a run relates to re-runs and backfills.
func showLineage(out *Execution, l *axtype.RunLineage, causedBy []axtype.AfterRun) {
	if l.RerunOf != nil {
		out.RerunOf = l.RerunOf.String()
	}
	for _, id := range l.Reruns {
		out.Reruns = append(out.Reruns, id.String())
	}
	if l.Backfill != nil {
		out.BackfillID = l.Backfill.String()
	}
	for _, r := range causedBy {
		out.CausedBy = append(out.CausedBy, CausingRun{ExecutionID: r.ID.String(), JobID: r.JobID.String(),
			Job: r.Group + "/" + r.Name, State: r.State, ScheduledFor: r.ScheduledFor, FinishedAt: r.FinishedAt})
	}
	if w := l.Wait; w != nil {
		out.Queue = &ExecutionQueue{Waiting: w.ReleasedAt == nil, QueuedAt: w.QueuedAt, ReleasedAt: w.ReleasedAt}
		if w.BehindID != uuid.Nil {
			out.Queue.Behind = w.BehindID.String()
		}
	}
}
