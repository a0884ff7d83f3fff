package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// NoticeArgs is the River job that delivers one failure notice. Unique
// per notice: the outbox inserts one job per row.
type NoticeArgs struct {
	ID int64 `json:"id" river:"unique"`
}

// Kind is the River job kind.
func (NoticeArgs) Kind() string { return "ax_notice" }

// InsertOpts puts notices on the callbacks' queue (same kind of work, same
// outbound policy), unique per notice.
func (NoticeArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: callbackQueue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// noticeWorker delivers notices: one attempt per run, snoozed until the
// next on failure, on the callbacks' retry schedule.
type noticeWorker struct {
	river.WorkerDefaults[NoticeArgs]
	pool   *pgxpool.Pool
	client *http.Client
	cfg    CallbackConfig
	// hosts are the callbacks' slots per host, which notices take too:
	// they share the callback workers, and a receiver that answers after
	// 29 s (no breaker trips on a slow 2xx) held one each, so a flood of
	// notices to one host (ten a minute per URL, any number of URLs) could
	// hold every worker and every other job's callbacks waited.
	hosts   *hostSlots
	logger  *slog.Logger
	agent   string
	timeout time.Duration
}

// Timeout is how long River lets one attempt run.
func (w *noticeWorker) Timeout(*river.Job[NoticeArgs]) time.Duration { return w.timeout }

// Work makes one attempt.
func (w *noticeWorker) Work(ctx context.Context, job *river.Job[NoticeArgs]) error {
	n, err := db.NoticeGetForDelivery(ctx, w.pool, job.Args.ID)
	if errors.Is(err, axtype.ErrNotFound) {
		return nil // its job or target was deleted
	}
	if err != nil {
		return err
	}
	if n.State != axtype.NoticePending {
		return nil // settled by an earlier run of this job
	}
	body, err := NoticeBody(n, time.Now())
	if err != nil {
		return err
	}
	if target, err := url.Parse(n.URL); err == nil {
		host := strings.ToLower(target.Hostname())
		if !w.hosts.take(host, w.cfg.MaxPerHost) {
			return river.JobSnooze(w.cfg.jittered(w.cfg.HoldRecheck))
		}
		defer w.hosts.give(host)
	}
	res := w.send(ctx, n, body)
	attempt := n.Attempts + 1
	then, wait := axtype.NoticeDelivered, time.Duration(0)
	if !res.delivered() {
		then = axtype.NoticeGivenUp
		if attempt <= len(w.cfg.RetrySchedule) {
			wait = max(w.cfg.jittered(w.cfg.RetrySchedule[attempt-1]), min(res.retryAfter, w.cfg.MaxRetryAfter))
			then = axtype.NoticePending
		}
	}
	var next *time.Time
	if wait > 0 {
		t := res.at.Add(res.latency + wait)
		next = &t
	}
	if err := db.NoticeRecordAttempt(ctx, w.pool, n.ID, attempt, then, res.status, res.errorText(), next); err != nil {
		return err
	}
	log := w.logger.With("notice_id", n.ID, "job_id", n.JobID, "event", n.Event, "kind", n.Kind, "attempt", attempt,
		"status", res.status)
	if n.ExecutionID != nil {
		log = log.With("execution_id", *n.ExecutionID)
	}
	switch then {
	case axtype.NoticeDelivered:
		log.InfoContext(ctx, "notice delivered")
	case axtype.NoticePending:
		log.WarnContext(ctx, "notice attempt failed; will retry", "error", res.errorText(), "next_attempt_at", next)
		return river.JobSnooze(wait)
	default:
		log.ErrorContext(ctx, "notice failed: retries exhausted", "error", res.errorText())
	}
	return nil
}

// send POSTs body to the target; a generic webhook is signed per
// Standard Webhooks with the job's secrets (webhook-id: notice_<id>).
func (w *noticeWorker) send(ctx context.Context, n *axtype.NoticeDelivery, body []byte) attemptResult {
	res := attemptResult{at: time.Now()}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.URL, bytes.NewReader(body))
	if err != nil {
		res.err = httptask.RedactURLError(err)
		return res
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", w.agent)
	if n.Kind == axtype.NoticeWebhook {
		secrets, err := webhook.ParseSecrets(n.Secrets...)
		if err == nil {
			err = webhook.Sign(req.Header, "notice_"+strconv.FormatInt(n.ID, 10), res.at, body, secrets...)
		}
		if err != nil {
			res.err = fmt.Errorf("error signing notice: %w", err)
			return res
		}
	}
	resp, err := w.client.Do(req)
	res.latency = time.Since(res.at)
	if err != nil {
		res.err = httptask.RedactURLError(err)
		return res
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	res.status = resp.StatusCode
	if res.status == http.StatusTooManyRequests || res.status == http.StatusServiceUnavailable {
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), res.at)
	}
	return res
}

// NoticePayload is the body of a generic webhook notice (Standard
// Webhooks' type/timestamp/data envelope).
type NoticePayload struct {
	Type      string     `json:"type"` // ax.notice.<event>
	Timestamp time.Time  `json:"timestamp"`
	Data      NoticeData `json:"data"`
}

// NoticeData is what a notice tells.
type NoticeData struct {
	NoticeID      int64      `json:"notice_id"`
	Event         string     `json:"event"`
	JobID         uuid.UUID  `json:"job_id"`
	JobName       string     `json:"job_name"`
	Group         string     `json:"group"`
	ExecutionID   *uuid.UUID `json:"execution_id,omitempty"`
	Detail        string     `json:"detail,omitempty"`
	FailedRuns    int        `json:"failed_runs,omitempty"`
	IncidentSince *time.Time `json:"incident_since,omitempty"`
	// Coalesced counts the notices to this URL the rate limit held back
	// since the previous one sent.
	Coalesced int    `json:"coalesced,omitempty"`
	Text      string `json:"text"`
}

// NoticeBody is the body sent for n: {"text": ...} to Slack, the signed
// envelope to a generic webhook.
func NoticeBody(n *axtype.NoticeDelivery, at time.Time) ([]byte, error) {
	text := NoticeText(n)
	if n.Kind == axtype.NoticeSlack {
		return json.Marshal(map[string]string{"text": text})
	}
	return json.Marshal(NoticePayload{Type: "ax.notice." + string(n.Event), Timestamp: at.UTC().Truncate(time.Second),
		Data: NoticeData{NoticeID: n.ID, Event: string(n.Event), JobID: n.JobID, JobName: n.JobName, Group: n.JobGroup,
			ExecutionID: n.ExecutionID, Detail: n.Detail, FailedRuns: n.FailedRuns, IncidentSince: n.IncidentSince,
			Coalesced: n.Coalesced, Text: text}})
}

// NoticeText is the one-line message of a notice.
func NoticeText(n *axtype.NoticeDelivery) string {
	job := n.JobName
	if n.JobGroup != "" {
		job = n.JobGroup + "/" + n.JobName
	}
	var b strings.Builder
	switch n.Event {
	case axtype.NoticeFailed:
		fmt.Fprintf(&b, "ax: job %s failed", job)
	case axtype.NoticeRecovered:
		fmt.Fprintf(&b, "ax: job %s recovered after %d failed run(s)", job, n.FailedRuns)
	case axtype.NoticeSetAside:
		fmt.Fprintf(&b, "ax: the trigger of job %s was set aside", job)
	case axtype.NoticeCallbackFailed:
		fmt.Fprintf(&b, "ax: a callback of job %s was given up", job)
	}
	if n.ExecutionID != nil {
		fmt.Fprintf(&b, " (execution %s)", *n.ExecutionID)
	}
	if n.Detail != "" {
		b.WriteString(": " + n.Detail)
	}
	if n.Coalesced > 0 {
		fmt.Fprintf(&b, " [%d earlier notice(s) to this target held back by its rate limit]", n.Coalesced)
	}
	return b.String()
}
