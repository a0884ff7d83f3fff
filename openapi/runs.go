package openapi

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// RunRequest submits an ad-hoc one-off run: a job definition without a
// trigger, run once at once. It is kept as a manual job (so its executions
// and callbacks work like any other); delete it when done.
type RunRequest struct {
	Name           string       `json:"name,omitempty" maxLength:"200" doc:"Name of the job that holds the run; default run-<execution id>"`
	Group          string       `json:"group,omitempty" maxLength:"200" doc:"Group of that job; default runs"`
	Owner          string       `json:"owner,omitempty" maxLength:"200"`
	Description    string       `json:"description,omitempty" maxLength:"4000"`
	Executor       JobExecutor  `json:"executor" doc:"What the run does; kind http without target labels is sent by ax itself"`
	Target         *JobTarget   `json:"target,omitempty" doc:"Which agents may run it"`
	Route          *JobRoute    `json:"route,omitempty"`
	Shards         *JobShards   `json:"shards,omitempty"`
	Priority       int          `json:"priority,omitempty" minimum:"-1000" maximum:"1000"`
	TimeoutSeconds int          `json:"timeout_seconds,omitempty" minimum:"1" maximum:"604800" doc:"Limit on one attempt of one task; default 3600, and at most 900 (the default) for HTTP sent by ax itself"`
	Retry          *JobRetry    `json:"retry,omitempty"`
	RateLimitClass string       `json:"rate_limit_class,omitempty" maxLength:"100" pattern:"^[A-Za-z0-9_.-]*$"`
	Callback       *JobCallback `json:"callback,omitempty" doc:"Where to announce the result"`
	Params         Params       `json:"params,omitempty" doc:"Parameters of the run: a JSON object of at most 256 KiB, nesting at most 64 levels, kept exactly (numbers are never rounded)"`
	RunLater
}

// job is the definition as a manual job.
func (r *RunRequest) job() *Job {
	return &Job{Name: r.Name, Group: r.Group, Owner: r.Owner, Description: r.Description,
		Trigger: &JobTrigger{Kind: string(axtype.TriggerManual)}, Executor: r.Executor, Target: r.Target, Route: r.Route, Shards: r.Shards,
		Priority: r.Priority, TimeoutSeconds: r.TimeoutSeconds, Retry: r.Retry, RateLimitClass: r.RateLimitClass,
		Callback: r.Callback, Params: r.Params}
}

// Resolve checks the definition as a job's, so errors name the same
// fields.
func (r *RunRequest) Resolve(ctx huma.Context, prefix *huma.PathBuffer) []error {
	j := r.job()
	j.Name = "run" // optional here
	errs := fieldErrors(j.Resolve(ctx, prefix))
	r.RunLater.validate(prefix, &errs)
	return errs
}

// RunAccepted is a submitted run: its execution (poll status_url, or wait
// with ?wait=) and the signing secret of its callbacks and HTTP requests,
// shown here only.
type RunAccepted struct {
	Execution     *Execution `json:"execution"`
	SigningSecret string     `json:"signing_secret" doc:"whsec_ secret that signs the run's callback and HTTP requests (Standard Webhooks)"`
}

type runInput struct {
	IdempotencyKey string `header:"Idempotency-Key" maxLength:"255" doc:"Same key and body: the same run, not a second one; same key, other body: 422"`
	Body           RunRequest
}

type runOutput struct {
	Location       string `header:"Location" doc:"Status URL of the execution"`
	SecretWithheld string `header:"Ax-Secret-Withheld" doc:"On a retry with the same Idempotency-Key: signing_secret, which the first answer showed and this one leaves empty"`
	Body           *RunAccepted
}

func (h *outboundHandlers) registerRuns(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "submit-run", Method: http.MethodPost, Path: "/v1/runs", Tags: []string{"Executions"},
		Summary: "Submit an ad-hoc run", DefaultStatus: http.StatusAccepted, MaxBodyBytes: jobBodyLimit,
		Description: "Runs a job definition once, now or later (run_at, delay_seconds: the answer's execution is then scheduled " +
			"and fires at that time with the same id), without a schedule: it is stored as a manual job " +
			"(group runs unless named) and fired in the same transaction. Answers 202 with the execution; " +
			"poll its status_url, long-poll it with ?wait=30s, or receive the callback. Honours Idempotency-Key: " +
			"a retry gets the same run, without its signing secret (shown in the first answer only; " +
			"Ax-Secret-Withheld names it).",
		Errors: []int{http.StatusConflict, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.run)
}

func (h *outboundHandlers) run(ctx context.Context, in *runInput) (*runOutput, error) {
	job := in.Body.job()
	if err := h.urls.check(ctx, job); err != nil {
		return nil, err
	}
	def, err := jobToDB(job, uuid.Nil)
	if err != nil {
		return nil, err
	}
	def.Name, def.Group = in.Body.Name, in.Body.Group // the service names unnamed runs
	if err := writable(ctx, cmp.Or(def.Group, queue.RunGroup), "body.group"); err != nil {
		return nil, err
	}
	if err := h.guard.class(ctx, def.RateLimitClass, "body.rate_limit_class"); err != nil {
		return nil, err
	}
	req := &queue.TriggerRequest{IdempotencyKey: in.IdempotencyKey, Method: http.MethodPost, Path: "/v1/runs"}
	if in.IdempotencyKey != "" {
		if req.APIKeyID, req.RequestHash, err = requestIdentity(ctx, in.Body); err != nil {
			return nil, err
		}
	}
	res, err := h.execs.Run(ctx, def, req, in.Body.when())
	if err != nil {
		return nil, runError(err, in)
	}
	var exec *Execution
	if res.Scheduled != nil {
		exec = executionFromScheduled(res.Scheduled)
	} else if exec, err = executionFromDB(res.Execution, nil); err != nil {
		return nil, err
	}
	out := &runOutput{Location: exec.StatusURL, Body: &RunAccepted{Execution: exec, SigningSecret: res.SigningSecret}}
	if res.Replayed {
		out.SecretWithheld = "signing_secret"
	}
	return out, nil
}

// requestIdentity is who asks (the API key) and a hash of what (the body
// decoded and encoded again, so spacing and key order do not matter).
func requestIdentity(ctx context.Context, body any) (uuid.UUID, []byte, error) {
	var keyID uuid.UUID
	if key, _ := ctx.Value(principalKey{}).(*axtype.APIKey); key != nil {
		keyID = key.ID
	}
	sum, err := bodyHash(body)
	return keyID, sum, err
}

// bodyHash hashes body decoded and encoded again: map keys sorted, spacing
// gone. Params are kept as sent, so they are decoded too (numbers exact):
// key order and spacing inside them do not matter either.
func bodyHash(body any) ([]byte, error) {
	raw, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	canonical, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(canonical)
	return sum[:], nil
}

func runError(err error, in *runInput) error {
	if errors.Is(err, queue.ErrIdempotencyMismatch) {
		return huma.Error422UnprocessableEntity("Idempotency-Key was used for a different request",
			&huma.ErrorDetail{Location: "header.Idempotency-Key", Message: "was used before with another body", Value: in.IdempotencyKey})
	}
	if errors.Is(err, axtype.ErrConflict) {
		return huma.Error409Conflict("a job named "+in.Body.Name+" already exists in group "+in.Body.Group,
			&huma.ErrorDetail{Location: "body.name", Message: "is taken in this group", Value: in.Body.Name})
	}
	return jobError(err, in.Body.job())
}
