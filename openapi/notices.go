package openapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// NoticeTarget is where a job's failure notices go.
type NoticeTarget struct {
	Kind string `json:"kind" enum:"slack,webhook" doc:"slack: POST {\"text\": ...} to a Slack-compatible incoming webhook; webhook: a JSON envelope signed per Standard Webhooks with the job's signing secret" example:"webhook"`
	URL  string `json:"url" minLength:"1" maxLength:"2048" doc:"Where to POST. Write-only credentials: userinfo and query values read back as the placeholder, which sent back keeps the stored value" example:"https://hooks.example.com/ax"`
	// Events empty means all of them.
	Events        []string   `json:"events,omitempty" maxItems:"4" uniqueItems:"true" enum:"failed,recovered,set_aside,callback_failed" doc:"Which events to send (default: all)"`
	IncidentOpen  bool       `json:"incident_open" readOnly:"true" doc:"Whether the job's last run that ended failed or succeeded: true from a run that failed for good until the next success"`
	IncidentSince *time.Time `json:"incident_since,omitempty" readOnly:"true"`
	FailedRuns    int        `json:"failed_runs" readOnly:"true" doc:"Runs failed in the open (or last) incident"`
}

// NoticeTargets is a job's list of notice targets.
type NoticeTargets struct {
	Targets []NoticeTarget `json:"targets" maxItems:"10" doc:"At most 10; empty turns notices off"`
}

// Notice is one failure notice and its delivery.
type Notice struct {
	ID            int64      `json:"id"`
	Event         string     `json:"event" enum:"failed,recovered,set_aside,callback_failed"`
	ExecutionID   *uuid.UUID `json:"execution_id,omitempty" doc:"The run (or the callback's run) that caused it"`
	Detail        string     `json:"detail,omitempty" doc:"The run's error, the set-aside reason or the callback's last error"`
	FailedRuns    int        `json:"failed_runs,omitempty" doc:"recovered: how many runs failed in the incident"`
	Coalesced     int        `json:"coalesced,omitempty" doc:"Notices to the same URL the rate limit held back before this one (told in its text)"`
	State         string     `json:"state" enum:"pending,delivered,notice_failed,rate_limited" doc:"rate_limited: not sent (over the target URL's rate), counted in the next one that is"`
	Attempts      int        `json:"attempts"`
	LastStatus    int        `json:"last_status,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	FailedAt      *time.Time `json:"failed_at,omitempty"`
	CreatedAt     time.Time  `json:"created_at"`
	TargetKind    string     `json:"target_kind" doc:"slack or webhook"`
	TargetURL     string     `json:"target_url" doc:"Credentials redacted"`
}

type noticeHandlers struct {
	notices *queue.NoticeService
	urls    *urlChecker
	guard   groupGuard
}

type noticeTargetsInput struct {
	ID   string `path:"id" format:"uuid" doc:"Job id"`
	Body NoticeTargets
}

type noticeTargetsOutput struct {
	Body NoticeTargets
}

type jobNoticesInput struct {
	ID    string `path:"id" format:"uuid" doc:"Job id"`
	Limit int    `query:"limit" minimum:"1" maximum:"200" default:"50"`
}

type noticeListOutput struct {
	Body struct {
		Notices []Notice `json:"notices"`
	}
}

func (h *noticeHandlers) register(api huma.API) {
	tags := []string{"Notices"}
	register(api, requireScope(huma.Operation{
		OperationID: "get-notice-targets", Method: http.MethodGet, Path: "/v1/jobs/{id}/notice-targets", Tags: tags,
		Summary:     "A job's failure-notice targets",
		Description: "The targets with credentials in their URLs redacted, and the incident each last saw.",
		Errors:      []int{http.StatusNotFound},
	}, ScopeRead), h.get)
	register(api, requireScope(huma.Operation{
		OperationID: "set-notice-targets", Method: http.MethodPut, Path: "/v1/jobs/{id}/notice-targets", Tags: tags,
		Summary: "Set where a job's failure notices go",
		Description: "Replaces the job's targets (at most 10). Each gets one notice per incident: failed when a run " +
			"fails for good (retries spent) after a success, recovered at the next success, set_aside when the trigger " +
			"is quarantined, callback_failed when a callback is given up. A target kept (same kind and URL) keeps its " +
			"open incident. URLs must be reachable under the server's outbound policy; a URL read back with redacted " +
			"credentials and sent again keeps the stored one.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeSubmit), h.set)
	register(api, requireScope(huma.Operation{
		OperationID: "list-job-notices", Method: http.MethodGet, Path: "/v1/jobs/{id}/notices", Tags: tags,
		Summary:     "A job's failure notices, newest first",
		Description: "Each notice with its event, target (credentials redacted), delivery state, attempts and last error.",
		Errors:      []int{http.StatusNotFound},
	}, ScopeRead), h.list)
}

func (h *noticeHandlers) get(ctx context.Context, in *struct {
	ID string `path:"id" format:"uuid" doc:"Job id"`
}) (*noticeTargetsOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	ts, err := h.notices.Targets(ctx, id)
	if err != nil {
		return nil, jobError(err, nil)
	}
	return &noticeTargetsOutput{Body: noticeTargetsFromDB(ts)}, nil
}

func (h *noticeHandlers) set(ctx context.Context, in *noticeTargetsInput) (*noticeTargetsOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	targets, err := h.validate(ctx, in.Body.Targets)
	if err != nil {
		return nil, err
	}
	ts, err := h.notices.SetTargets(ctx, id, targets)
	if err != nil {
		return nil, jobError(err, nil)
	}
	return &noticeTargetsOutput{Body: noticeTargetsFromDB(ts)}, nil
}

// validate checks what the schema cannot: each URL under the outbound
// policy (a redacted one is checked when restored, as stored URLs were),
// and no target twice.
func (h *noticeHandlers) validate(ctx context.Context, in []NoticeTarget) ([]axtype.NoticeTarget, error) {
	var errs fieldErrors
	seen := map[string]int{}
	out := make([]axtype.NoticeTarget, len(in))
	for i, t := range in {
		loc := fmt.Sprintf("body.targets[%d].url", i)
		key := t.Kind + " " + t.URL
		if j, dup := seen[key]; dup {
			errs.add(loc, fmt.Sprintf("is the same target as targets[%d]", j), t.URL)
		}
		seen[key] = i
		if !containsPlaceholder(t.URL) {
			var err error
			awayWhile(ctx, func() { _, err = h.urls.policy.ValidateURL(ctx, t.URL) }) // a name lookup
			if err != nil {
				errs.add(loc, h.urls.refused(ctx, "notice target url", err), t.URL)
			}
		}
		out[i] = axtype.NoticeTarget{Kind: axtype.NoticeKind(t.Kind), URL: t.URL}
		for _, ev := range t.Events {
			out[i].Events = append(out[i].Events, axtype.NoticeEvent(ev))
		}
	}
	if len(errs) > 0 {
		return nil, huma.Error422UnprocessableEntity("a notice target is not valid", errs...)
	}
	return out, nil
}

func containsPlaceholder(raw string) bool { return strings.Contains(raw, queue.Redacted) }

func (h *noticeHandlers) list(ctx context.Context, in *jobNoticesInput) (*noticeListOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	if err := h.guard.job(ctx, id); err != nil {
		return nil, err
	}
	ns, err := h.notices.List(ctx, id, in.Limit)
	if err != nil {
		return nil, jobError(err, nil)
	}
	out := &noticeListOutput{}
	out.Body.Notices = make([]Notice, len(ns))
	for i, n := range ns {
		out.Body.Notices[i] = Notice{ID: n.ID, Event: string(n.Event), ExecutionID: n.ExecutionID, Detail: n.Detail,
			FailedRuns: n.FailedRuns, Coalesced: n.Coalesced, State: string(n.State), Attempts: n.Attempts,
			LastStatus: n.LastStatus, LastError: n.LastError, NextAttemptAt: n.NextAttemptAt, DeliveredAt: n.DeliveredAt,
			FailedAt: n.FailedAt, CreatedAt: n.CreatedAt, TargetKind: string(n.TargetKind), TargetURL: queue.RedactURL(n.TargetURL)}
	}
	return out, nil
}

func noticeTargetsFromDB(ts []axtype.NoticeTarget) NoticeTargets {
	out := NoticeTargets{Targets: make([]NoticeTarget, len(ts))}
	for i, t := range ts {
		nt := NoticeTarget{Kind: string(t.Kind), URL: queue.RedactURL(t.URL), IncidentOpen: t.IncidentOpen,
			IncidentSince: t.IncidentSince, FailedRuns: t.FailedRuns}
		for _, ev := range t.Events {
			nt.Events = append(nt.Events, string(ev))
		}
		out.Targets[i] = nt
	}
	return out
}
