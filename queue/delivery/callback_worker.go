package delivery

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// CallbackConfig tunes callback delivery. Tests compress every duration.
type CallbackConfig struct {
	// RetrySchedule is the wait before each retry of a failed delivery;
	// after the last the callback is callback_failed. Defaults to 1 s, 5 s,
	// 30 s, 2 min, 10 min (six attempts in about 13 minutes).
	RetrySchedule []time.Duration
	// Jitter spreads each wait by up to this fraction either way, so
	// callbacks that failed together do not retry together. Defaults to
	// 0.2; negative turns it off.
	Jitter float64
	// MaxRetryAfter caps how long a receiver's Retry-After (on 429 and 503)
	// may delay the next attempt. Defaults to 1 hour.
	MaxRetryAfter time.Duration
	// BreakerThreshold is how many consecutive failures to one host open
	// its breaker. Defaults to 5.
	BreakerThreshold int
	// BreakerOpenFor is how long an open breaker holds deliveries before
	// one probe may go. Defaults to 30 s.
	BreakerOpenFor time.Duration
	// BreakerProbeTimeout is how long a half-open breaker waits for its
	// probe before another delivery may probe (the first one's sender
	// died). Defaults to 1 minute.
	BreakerProbeTimeout time.Duration
	// HoldRecheck is how often a delivery held by a half-open breaker
	// looks again (each wait gets up to as much random spread). Defaults
	// to 1 s.
	HoldRecheck time.Duration
	// MaxPerHost caps the deliveries this replica has in flight to one
	// host; more wait (snooze HoldRecheck) for a slot. Defaults to 16.
	MaxPerHost int
	// MaxShards caps the shards listed in a payload (all are counted).
	// Defaults to 1000.
	MaxShards int
	// MaxShardBytes caps the results and errors of the shards listed (the
	// first is listed whatever its size). Defaults to 4 MiB.
	MaxShardBytes int64
	// ShowAttempts is how many recent attempts the execution API shows.
	// Defaults to 50.
	ShowAttempts int
}

// DefaultRetrySchedule is the wait before each callback retry.
var DefaultRetrySchedule = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}

func (c CallbackConfig) withDefaults() CallbackConfig {
	if len(c.RetrySchedule) == 0 {
		c.RetrySchedule = DefaultRetrySchedule
	}
	c.Jitter = max(cmp.Or(c.Jitter, 0.2), 0)
	c.MaxRetryAfter = cmp.Or(c.MaxRetryAfter, time.Hour)
	c.BreakerThreshold = cmp.Or(c.BreakerThreshold, 5)
	c.BreakerOpenFor = cmp.Or(c.BreakerOpenFor, 30*time.Second)
	c.BreakerProbeTimeout = cmp.Or(c.BreakerProbeTimeout, time.Minute)
	c.HoldRecheck = cmp.Or(c.HoldRecheck, time.Second)
	c.MaxShards = cmp.Or(c.MaxShards, 1000)
	c.MaxPerHost = cmp.Or(c.MaxPerHost, 16)
	c.MaxShardBytes = cmp.Or(c.MaxShardBytes, 4<<20)
	c.ShowAttempts = cmp.Or(c.ShowAttempts, 50)
	return c
}

func (c CallbackConfig) validate() error {
	for i, d := range c.RetrySchedule {
		if d <= 0 {
			return fmt.Errorf("callback retry %d waits %s; waits must be positive", i+1, d)
		}
	}
	if c.Jitter >= 1 {
		return fmt.Errorf("callback jitter %.2f must be below 1", c.Jitter)
	}
	if c.BreakerThreshold < 1 {
		return fmt.Errorf("breaker threshold %d must be at least 1", c.BreakerThreshold)
	}
	return nil
}

// jittered spreads d by up to c.Jitter either way.
func (c CallbackConfig) jittered(d time.Duration) time.Duration {
	if c.Jitter == 0 {
		return d
	}
	return time.Duration(float64(d) * (1 + c.Jitter*(2*rand.Float64()-1)))
}

// CallbackArgs is the River job that delivers one execution's callback.
// Unique per execution and delivery: the outbox and a redelivery insert
// at most one job each.
type CallbackArgs struct {
	ExecutionID uuid.UUID `json:"execution_id" river:"unique"`
	Delivery    int       `json:"delivery" river:"unique"`
}

// Kind is the River job kind.
func (CallbackArgs) Kind() string { return "ax_callback" }

// InsertOpts puts callbacks on their own queue, unique per delivery.
func (CallbackArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{Queue: callbackQueue, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// callbackWorker delivers callbacks: one attempt per run; a failure
// snoozes the job until the next attempt (River's own retries are kept
// for errors of ax itself, such as a lost database).
type callbackWorker struct {
	river.WorkerDefaults[CallbackArgs]
	pool    *pgxpool.Pool
	client  *http.Client
	cfg     CallbackConfig
	breaker *breaker
	hosts   *hostSlots // shared with the notices' worker
	outbox  *Outbox
	logger  *slog.Logger
	metrics *metrics.OutboundMetrics
	agent   string // User-Agent
	// timeout bounds one run: the attempt's timeout plus the time to
	// record it (callbackJobTimeout).
	timeout time.Duration
}

// Timeout is how long River lets one delivery run; a run of a replica
// that died is rescued past it (rescueArgs).
func (w *callbackWorker) Timeout(*river.Job[CallbackArgs]) time.Duration { return w.timeout }

// Work makes one delivery attempt of the callback, unless its host's
// breaker holds it or the replica has MaxPerHost in flight to the host.
func (w *callbackWorker) Work(ctx context.Context, job *river.Job[CallbackArgs]) error {
	d, err := db.CallbackGetForDelivery(ctx, w.pool, job.Args.ExecutionID, w.cfg.MaxShards, w.cfg.MaxShardBytes)
	if errors.Is(err, axtype.ErrNotFound) {
		return nil // the execution (and its job) was deleted
	}
	if err != nil {
		return err
	}
	if d.Delivery != job.Args.Delivery || d.State != axtype.CallbackPending {
		return nil // redelivered since, or settled by an earlier run of this job
	}
	if d.WaitingFor != "" {
		// An ordered job's earlier callback is still pending: this one
		// goes after it is delivered or has failed for good. The check is
		// in the database, so it holds whichever replica sends either.
		w.logger.DebugContext(ctx, "callback waits for an earlier one of its job", "execution_id", d.ExecutionID,
			"job_id", d.JobID, "sequence", d.Sequence, "waiting_for", d.WaitingFor)
		return river.JobSnooze(w.orderedWait(d))
	}
	target, err := callbackTarget(d.URL)
	if err != nil {
		return w.giveUp(ctx, d, err.Error())
	}
	// By host name, whatever the port or case: a job whose URLs named
	// other ports of one host would get a share per port.
	host := strings.ToLower(target.Hostname())
	if !w.hosts.take(host, w.cfg.MaxPerHost) {
		w.metrics.CallbacksHeld.Inc()
		return river.JobSnooze(w.cfg.jittered(w.cfg.HoldRecheck))
	}
	defer w.hosts.give(host)
	adm, err := w.breaker.admit(ctx, target.Host)
	if err != nil || adm.hold > 0 {
		if adm.hold > 0 {
			w.metrics.CallbacksHeld.Inc()
		}
		return cmp.Or(err, river.JobSnooze(adm.hold))
	}
	body, err := callbackPayload(d)
	if err != nil {
		return w.giveUp(ctx, d, err.Error())
	}
	res := w.send(ctx, d, body)
	return w.settle(ctx, d, target.Host, adm, res)
}

// hostSlots counts a replica's deliveries in flight by host. Without a
// bound, a receiver that answered after 29 s (a 2xx, so its breaker
// stayed closed) held every callback worker once its job's runs ended
// faster than the workers could wait out its answers, and every other
// job's callbacks queued behind it.
type hostSlots struct {
	mu       sync.Mutex
	inFlight map[string]int
}

// take takes one of host's max slots, if one is free.
func (s *hostSlots) take(host string, max int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[host] >= max {
		return false
	}
	if s.inFlight == nil {
		s.inFlight = map[string]int{}
	}
	s.inFlight[host]++
	return true
}

// give returns a slot take took.
func (s *hostSlots) give(host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[host]--; s.inFlight[host] <= 0 {
		delete(s.inFlight, host)
	}
}

// orderedWait is how long a callback held by an earlier one of its job
// snoozes: until that one's next attempt is due when it waits for a retry
// (a waiting callback reads its delivery again a few times per attempt of
// the earlier one, not every HoldRecheck for ten minutes), else
// HoldRecheck; jittered either way.
func (w *callbackWorker) orderedWait(d *axtype.CallbackDelivery) time.Duration {
	wait := w.cfg.HoldRecheck
	if d.WaitingNextAttempt != nil {
		wait = max(wait, time.Until(*d.WaitingNextAttempt))
	}
	return w.cfg.jittered(wait)
}

// callbackTarget checks a callback URL enough to send to it (the outbound
// client checks where it leads).
func callbackTarget(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("the job has no callback URL any more")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("callback URL %q is not an absolute URL", raw)
	}
	return u, nil
}

// attemptResult is what one request got.
type attemptResult struct {
	at         time.Time
	status     int // 0: no answer
	latency    time.Duration
	err        error
	retryAfter time.Duration
}

func (r attemptResult) delivered() bool { return r.err == nil && r.status >= 200 && r.status < 300 }

// unavailable says whether the host looked down or overloaded: what
// counts against its breaker. Other answers (4xx) show it is up.
func (r attemptResult) unavailable() bool {
	return r.err != nil || r.status >= 500 || r.status == http.StatusTooManyRequests ||
		r.status == http.StatusRequestTimeout
}

func (r attemptResult) errorText() string {
	switch {
	case r.err != nil:
		return r.err.Error()
	case !r.delivered():
		return "receiver answered " + strconv.Itoa(r.status) + " " + http.StatusText(r.status)
	}
	return ""
}

// send POSTs body, signed, to the callback URL.
func (w *callbackWorker) send(ctx context.Context, d *axtype.CallbackDelivery, body []byte) attemptResult {
	res := attemptResult{at: time.Now()}
	req, err := w.request(ctx, d, body, res.at)
	if err != nil {
		res.err = err
		return res
	}
	resp, err := w.client.Do(req)
	res.latency = time.Since(res.at)
	if err != nil {
		res.err = httptask.RedactURLError(err)
		return res
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	res.status = resp.StatusCode
	if res.status == http.StatusTooManyRequests || res.status == http.StatusServiceUnavailable {
		res.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), res.at)
	}
	return res
}

func (w *callbackWorker) request(ctx context.Context, d *axtype.CallbackDelivery, body []byte, at time.Time) (*http.Request, error) {
	secrets, err := webhook.ParseSecrets(d.Secrets...)
	if err != nil {
		return nil, fmt.Errorf("error reading the job's signing secret: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", w.agent)
	req.Header.Set("Ax-Callback-Attempt", strconv.Itoa(d.Attempts+1))
	req.Header.Set("Ax-Callback-Sequence", strconv.FormatInt(d.Sequence, 10))
	if d.TraceParent != "" {
		req.Header.Set("traceparent", d.TraceParent) // the receiver's spans join the run's trace
	}
	if err := webhook.Sign(req.Header, d.ExecutionID.String(), at, body, secrets...); err != nil {
		return nil, fmt.Errorf("error signing callback: %w", err)
	}
	return req, nil
}

// parseRetryAfter reads a Retry-After header: delay-seconds or an
// HTTP-date. 0 when absent or unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(v); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// settle records the attempt, moves the breaker and decides what comes
// next: done, or a snooze until the next attempt.
func (w *callbackWorker) settle(ctx context.Context, d *axtype.CallbackDelivery, host string, adm admission, res attemptResult) error {
	rec := &axtype.CallbackAttemptRecord{CallbackRef: axtype.CallbackRef{ExecutionID: d.ExecutionID, Delivery: d.Delivery},
		Attempt: d.Attempts + 1, URL: d.URL, At: res.at, StatusCode: res.status, Latency: res.latency,
		Error: res.errorText(), Then: axtype.CallbackDelivered}
	wait := w.nextWait(rec.Attempt, res)
	if !res.delivered() {
		rec.Then = axtype.CallbackFailed
		if wait > 0 {
			next := res.at.Add(res.latency + wait)
			rec.Then, rec.NextAttemptAt = axtype.CallbackPending, &next
		}
	}
	err := w.record(ctx, rec, host, adm, res)
	if errors.Is(err, axtype.ErrNotFound) {
		return nil // redelivered while this attempt ran
	}
	if err != nil {
		return err
	}
	w.observe(ctx, d, rec, res)
	if rec.Then == axtype.CallbackPending {
		return river.JobSnooze(wait)
	}
	return nil
}

// record stores the attempt and, when the breaker has something to count
// (a failure, or a success after failures), the breaker's move, in one
// transaction. A success to a healthy host is one statement.
func (w *callbackWorker) record(ctx context.Context, rec *axtype.CallbackAttemptRecord, host string, adm admission, res attemptResult) error {
	breaker := res.unavailable() || !adm.clean
	if !breaker && rec.Then != axtype.CallbackFailed {
		return db.CallbackRecordAttempt(ctx, w.pool, rec)
	}
	return db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		if err := db.CallbackRecordAttempt(ctx, tx, rec); err != nil {
			return err
		}
		if breaker {
			if err := w.breaker.record(ctx, tx, host, adm.probe, res.unavailable()); err != nil {
				return err
			}
		}
		// A callback given up writes its job's callback_failed notices
		// (a trigger): they are enqueued in this transaction.
		return w.outbox.Flush(ctx, tx)
	})
}

// nextWait is how long until the attempt after attempt n (0: none left).
func (w *callbackWorker) nextWait(n int, res attemptResult) time.Duration {
	if res.delivered() || n > len(w.cfg.RetrySchedule) {
		return 0
	}
	wait := w.cfg.jittered(w.cfg.RetrySchedule[n-1])
	return max(wait, min(res.retryAfter, w.cfg.MaxRetryAfter))
}

func (w *callbackWorker) observe(ctx context.Context, d *axtype.CallbackDelivery, rec *axtype.CallbackAttemptRecord, res attemptResult) {
	if res.status != 0 {
		w.metrics.CallbackLatency.Observe(res.latency.Seconds())
	}
	log := w.logger.With("execution_id", d.ExecutionID, "job_id", d.JobID, "delivery", d.Delivery,
		"attempt", rec.Attempt, "status", res.status, "latency_ms", res.latency.Milliseconds())
	switch rec.Then {
	case axtype.CallbackDelivered:
		w.metrics.CallbackAttempts.WithLabelValues("delivered").Inc()
		w.metrics.CallbacksDelivered.Inc()
		log.InfoContext(ctx, "callback delivered")
	case axtype.CallbackPending:
		w.metrics.CallbackAttempts.WithLabelValues("failed").Inc()
		log.WarnContext(ctx, "callback attempt failed; will retry", "error", rec.Error, "next_attempt_at", rec.NextAttemptAt)
	default:
		w.metrics.CallbackAttempts.WithLabelValues("failed").Inc()
		w.metrics.CallbacksFailed.Inc()
		log.ErrorContext(ctx, "callback failed: retries exhausted", "error", rec.Error)
	}
}

// giveUp fails a delivery that cannot be attempted.
func (w *callbackWorker) giveUp(ctx context.Context, d *axtype.CallbackDelivery, reason string) error {
	err := db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		if err := db.CallbackGiveUp(ctx, tx, axtype.CallbackRef{ExecutionID: d.ExecutionID, Delivery: d.Delivery}, reason); err != nil {
			return err
		}
		return w.outbox.Flush(ctx, tx)
	})
	if err != nil {
		return err
	}
	w.metrics.CallbacksFailed.Inc()
	w.logger.ErrorContext(ctx, "callback failed: cannot be sent", "execution_id", d.ExecutionID, "job_id", d.JobID, "error", reason)
	return nil
}
