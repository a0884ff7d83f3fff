package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
)

// HTTPTaskConfig tunes agentless HTTP tasks.
type HTTPTaskConfig struct {
	// PublicURL is where targets reach ax's API, for the completion URL
	// sent with each request (a target answering 202 posts its result
	// there). Empty: no completion URL is sent, and a 202 can only time
	// out.
	PublicURL string
	// LeaseGrace is how much longer than the task's timeout its lease
	// lasts, so the reaper times it out (and retries it) rather than calls
	// it lost. Defaults to 30 s.
	LeaseGrace time.Duration
	// ReaperWait is how long a worker that finds its task past its deadline
	// waits for the reaper before it looks again. Defaults to 1 s.
	ReaperWait time.Duration
	// MaxPerJob and MaxPerHost cap how many requests of one job, and to
	// one host (host:port), are in flight at once across all replicas, so
	// that a job of many shards aimed at a target that never answers holds
	// a bounded share of the HTTP workers and never starves other jobs. A
	// request over a cap waits without holding a worker (River snooze),
	// and a request that gets its answer wakes the one that has waited
	// longest for its job and for its host.
	// Default to a quarter and a half of RiverConfig.HTTPWorkers.
	MaxPerJob  int
	MaxPerHost int
	// SlotWait is how long a request over a cap waits at most before it
	// looks for room again (plus up to half as much jitter), should no
	// answer wake it: a slot freed otherwise (its replica died) or a wake
	// lost. Defaults to 10 s.
	SlotWait time.Duration
}

// slotRewake is how long a woken request has to take its turn before the
// next freed slot may wake it again rather than the next in line.
const slotRewake = 2 * time.Second

// slotFirstWait is the shortest a request over a cap waits before it
// looks for room itself.
const slotFirstWait = 50 * time.Millisecond

// heldWaitMax is the longest a request held below its rate class's
// priority floor waits before it looks again.
const heldWaitMax = 10 * time.Second

// MaxAgentlessHTTPTimeout is the longest an agentless HTTP task may run
// (the API refuses a longer timeout_seconds for such a job): its request
// holds one of ax serve's HTTP workers while it waits. Longer work runs on
// an agent (target labels), or answers 202 at once and posts its result to
// the completion URL.
const MaxAgentlessHTTPTimeout = axtype.MaxAgentlessTimeoutSeconds * time.Second

func (c HTTPTaskConfig) withDefaults() HTTPTaskConfig {
	c.LeaseGrace = cmp.Or(c.LeaseGrace, 30*time.Second)
	c.ReaperWait = cmp.Or(c.ReaperWait, time.Second)
	c.SlotWait = cmp.Or(c.SlotWait, 10*time.Second)
	return c
}

func (c HTTPTaskConfig) validate() error {
	if c.MaxPerJob < 0 || c.MaxPerHost < 0 {
		return fmt.Errorf("HTTP task caps must not be negative: MaxPerJob %d, MaxPerHost %d", c.MaxPerJob, c.MaxPerHost)
	}
	return nil
}

// HTTPTaskArgs is the River job that sends one attempt of an agentless
// HTTP task. Unique per task and attempt.
type HTTPTaskArgs struct {
	TaskID      uuid.UUID `json:"task_id" river:"unique"`
	Attempt     int       `json:"attempt" river:"unique"`
	ExecutionID uuid.UUID `json:"execution_id"`
}

// Kind is the River job kind.
func (HTTPTaskArgs) Kind() string { return "ax_http_task" }

// InsertOpts puts HTTP tasks on their own queue, unique per attempt.
func (HTTPTaskArgs) InsertOpts() river.InsertOpts {
	return *httpTaskOpts(0)
}

// httpTaskOpts orders HTTP tasks by their priority: River's 1 (first) for
// priorities above 0, 2 for 0, 3 below.
func httpTaskOpts(priority int) *river.InsertOpts {
	p := 2
	switch {
	case priority > 0:
		p = 1
	case priority < 0:
		p = 3
	}
	return &river.InsertOpts{Queue: httpQueue, Priority: p, UniqueOpts: river.UniqueOpts{ByArgs: true}}
}

// httpTaskWorker sends agentless HTTP tasks. It leases the task with a
// fresh token like an agent would, so the task state machine (results
// fenced by the token, retries after the job's backoff, timeouts by the
// reaper) is the agents' one.
type httpTaskWorker struct {
	river.WorkerDefaults[HTTPTaskArgs]
	pool    *pgxpool.Pool
	client  *http.Client
	cfg     HTTPTaskConfig
	outbox  *Outbox
	logger  *slog.Logger
	metrics *metrics.Metrics
	out     *metrics.OutboundMetrics
	agent   string
}

// Timeout lets a request run as long as the longest task timeout, which
// bounds it (River's default of one minute would cut long requests
// short), and no longer: River rescues a job of a replica that died only
// past its timeout, and never one without (-1, which this was).
func (w *httpTaskWorker) Timeout(*river.Job[HTTPTaskArgs]) time.Duration {
	return httpJobTimeout(w.cfg.LeaseGrace)
}

// Work sends the attempt when its task is due and its job and host have
// a free slot, or waits for them without holding the worker.
func (w *httpTaskWorker) Work(ctx context.Context, job *river.Job[HTTPTaskArgs]) error {
	task, waited, err := w.lease(ctx, job.ID, job.Args)
	switch {
	case errors.Is(err, errNoSlot):
		w.out.HTTPTaskSlotWaits.Inc()
		// An answer wakes it. Should none, it looks again after about as
		// long as it has waited, within [slotFirstWait, SlotWait]: an answer
		// that came before its River job was snoozed woke nothing (River
		// leaves a running job alone), and that must cost little.
		wait := min(w.cfg.SlotWait, max(slotFirstWait, waited))
		return river.JobSnooze(wait + rand.N(wait/2+1))
	case errors.Is(err, axtype.ErrNotFound):
		return w.wait(ctx, job.Args)
	case err != nil:
		return err
	}
	res := w.send(ctx, task)
	// The answer is in: the slot is free (a 202's wait holds none).
	if err := w.freeSlot(context.WithoutCancel(ctx), task); err != nil {
		w.logger.WarnContext(ctx, "http task slot not released; it expires", "error", err,
			"task_id", task.ID, "execution_id", task.ExecutionID, "job_id", task.JobID)
	}
	return w.settle(ctx, job.Args, task, res)
}

// errNoSlot means the attempt is due but its job or host has as many
// requests in flight as it may.
var errNoSlot = errors.New("no free http task slot")

// lease takes a slot for the attempt and leases its task, in one
// transaction: axtype.ErrNotFound when the attempt is not due (or its class
// holds it back), errNoSlot when its job or host is at its cap.
func (w *httpTaskWorker) lease(ctx context.Context, riverJobID int64, args HTTPTaskArgs) (*axtype.HTTPTask, time.Duration, error) {
	jobID, rawURL, err := db.TaskGetHTTPTarget(ctx, w.pool, args.TaskID)
	if errors.Is(err, axtype.ErrNotFound) {
		// Its run ended (cancelled while it waited): a wait left behind
		// would take the wake of a request still waiting.
		if endErr := db.HTTPTaskSlotWaitEnd(ctx, w.pool, riverJobID); endErr != nil {
			return nil, 0, endErr
		}
	}
	if err != nil {
		return nil, 0, err
	}
	slot := &axtype.HTTPTaskSlot{TaskID: args.TaskID, Attempt: args.Attempt, JobID: jobID, Host: slotHost(rawURL),
		MaxPerJob: w.cfg.MaxPerJob, MaxPerHost: w.cfg.MaxPerHost, Hold: MaxAgentlessHTTPTimeout + w.cfg.LeaseGrace,
		RiverJobID: riverJobID}
	// Without a slot the transaction still commits: it records the wait,
	// or ends it.
	var got *axtype.HTTPTaskSlotOutcome
	task, err := db.WithTxV(ctx, w.pool, func(tx pgx.Tx) (*axtype.HTTPTask, error) {
		var err error
		if got, err = db.HTTPTaskSlotTake(ctx, tx, slot); err != nil || !got.Taken {
			return nil, err
		}
		return db.TaskLeaseAgentless(ctx, tx, args.TaskID, args.Attempt, w.cfg.LeaseGrace)
	})
	switch {
	case err != nil:
		return nil, 0, err
	case !got.Due:
		return nil, 0, axtype.ErrNotFound
	case !got.Taken:
		return nil, got.Waited, errNoSlot
	}
	return task, 0, nil
}

// freeSlot frees a task's slot and, in the same transaction, makes the
// River jobs of the requests waiting for it available now (without a
// River client in ctx, they wait for their SlotWait). Should waking them
// fail, the slot is freed all the same, and they look for room later.
func (w *httpTaskWorker) freeSlot(ctx context.Context, task *axtype.HTTPTask) error {
	client, _ := river.ClientFromContextSafely[pgx.Tx](ctx)
	err := db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
		wake, err := db.HTTPTaskSlotRelease(ctx, tx, task.ID, slotRewake)
		if err != nil || client == nil {
			return err
		}
		for _, id := range wake {
			_, err := client.JobRetryTx(ctx, tx, id)
			if errors.Is(err, river.ErrNotFound) {
				err = db.HTTPTaskSlotWaitEnd(ctx, tx, id)
			}
			if err != nil {
				return fmt.Errorf("error waking the request of river job %d: %w", id, err)
			}
		}
		if len(wake) == 0 {
			return nil
		}
		// A retried job is available at once, but River finds it only on
		// a fetch: tell the producers, at this transaction's commit.
		return notifyQueue(ctx, tx, httpQueue)
	})
	if err != nil {
		w.logger.WarnContext(ctx, "requests waiting for an http task slot not woken; they look for room later",
			"error", err, "task_id", task.ID, "execution_id", task.ExecutionID, "job_id", task.JobID)
		_, err = db.HTTPTaskSlotRelease(ctx, w.pool, task.ID, slotRewake)
	}
	return err
}

// slotHost is the host:port a URL's requests go to, as slots count it.
func slotHost(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return rawURL
	}
	return strings.ToLower(u.Host)
}

// wait decides what to do with an attempt that could not be leased: done
// when the task ended or moved on (a later attempt is handed its own job),
// else a snooze until it is due or its deadline passed.
func (w *httpTaskWorker) wait(ctx context.Context, args HTTPTaskArgs) error {
	st, err := db.TaskGetStatus(ctx, w.pool, args.TaskID)
	switch {
	case errors.Is(err, axtype.ErrNotFound):
		return nil
	case err != nil:
		return err
	case !st.Agentless || st.State.Ended() || st.Attempt < args.Attempt:
		return nil
	case st.Attempt > args.Attempt:
		return db.WithTx(ctx, w.pool, func(tx pgx.Tx) error {
			return w.outbox.insertHTTPAttempt(ctx, tx, HTTPTaskArgs{TaskID: args.TaskID, Attempt: st.Attempt,
				ExecutionID: st.ExecutionID}, st.Priority)
		})
	case st.State == axtype.TaskPending && !st.NotBefore.Before(axtype.QueuedHold):
		// Its run waits behind an unfinished one (policy queue): the
		// release sets not_before in the database, so look again soon.
		return river.JobSnooze(time.Second)
	case st.State == axtype.TaskPending && st.NotBefore.After(st.Now):
		return river.JobSnooze(max(st.NotBefore.Sub(st.Now), 10*time.Millisecond))
	case st.State == axtype.TaskPending && st.TokenWait > 0: // its rate class is dry
		return river.JobSnooze(st.TokenWait + 10*time.Millisecond)
	case st.State == axtype.TaskPending: // held below its class's priority floor
		// It looks again after about as long as it has been due (from
		// ReaperWait to heldWaitMax): N held requests looked N times a
		// second while their class was degraded, when the database can
		// least afford it. A lowered floor reaches them within heldWaitMax.
		wait := min(heldWaitMax, max(w.cfg.ReaperWait, st.Now.Sub(st.NotBefore)))
		return river.JobSnooze(wait + rand.N(wait/4+1))
	case st.Deadline.After(st.Now): // a 202's result is awaited
		return river.JobSnooze(st.Deadline.Sub(st.Now) + w.cfg.ReaperWait)
	}
	return river.JobSnooze(w.cfg.ReaperWait) // past its deadline: the reaper times it out
}

// httpResult is what one request got: an answer, or err without one.
type httpResult struct {
	answer  httptask.Answer
	err     error
	latency time.Duration
	// code is the attempt's error code should it fail without an answer:
	// connect or timeout ("" when no request was made).
	code string
}

// send makes the request, bounded by the task's timeout (and by
// MaxAgentlessHTTPTimeout, for jobs saved before that cap).
func (w *httpTaskWorker) send(ctx context.Context, t *axtype.HTTPTask) httpResult {
	ctx, cancel := context.WithTimeout(ctx, min(time.Duration(t.TimeoutSeconds)*time.Second, MaxAgentlessHTTPTimeout))
	defer cancel()
	start := time.Now()
	req, err := httpTaskRequest(ctx, t, w.cfg, w.agent)
	if err != nil {
		return httpResult{err: err}
	}
	resp, err := w.client.Do(req)
	if err != nil {
		return httpResult{err: httptask.RedactURLError(err), latency: time.Since(start), code: httptask.TransportErrorCode(err)}
	}
	answer, err := httptask.ReadAnswer(resp)
	res := httpResult{answer: answer, latency: time.Since(start)}
	if err != nil { // the answer broke off: no complete answer
		res.err, res.code = err, httptask.TransportErrorCode(err)
	}
	return res
}

// settle records the outcome (httptask.Answer.Outcome): 2xx succeeds with
// the body as result; 202 leaves the task running until its result is
// posted or its deadline passes; anything else fails the attempt
// (retried per the job's policy).
func (w *httpTaskWorker) settle(ctx context.Context, args HTTPTaskArgs, t *axtype.HTTPTask, res httpResult) error {
	log := w.logger.With("execution_id", t.ExecutionID, "task_id", t.ID, "job_id", t.JobID,
		"shard", t.ShardIndex, "attempt", t.Attempt, "status", res.answer.Status, "latency_ms", res.latency.Milliseconds())
	if res.err != nil {
		w.out.HTTPTaskRequests.WithLabelValues("failed").Inc()
		return w.complete(ctx, args, t, axtype.TaskResult{State: axtype.TaskFailed, Error: res.err.Error(), ErrorCode: res.code}, log)
	}
	switch res.answer.Outcome() {
	case httptask.Accepted:
		w.out.HTTPTaskRequests.WithLabelValues("accepted").Inc()
		log.InfoContext(ctx, "http task accepted; awaiting its result", "deadline", t.Deadline)
		return river.JobSnooze(time.Duration(t.TimeoutSeconds)*time.Second + w.cfg.ReaperWait)
	case httptask.Succeeded:
		w.out.HTTPTaskRequests.WithLabelValues("succeeded").Inc()
		return w.complete(ctx, args, t, axtype.TaskResult{State: axtype.TaskSucceeded, Result: res.answer.Result()}, log)
	}
	w.out.HTTPTaskRequests.WithLabelValues("failed").Inc()
	return w.complete(ctx, args, t, axtype.TaskResult{State: axtype.TaskFailed, Error: res.answer.Error(),
		ErrorCode: res.answer.ErrorCode()}, log)
}

// complete records the attempt's result with its token and, when the task
// is retried, enqueues the next attempt, in one transaction.
func (w *httpTaskWorker) complete(ctx context.Context, args HTTPTaskArgs, t *axtype.HTTPTask, r axtype.TaskResult, log *slog.Logger) error {
	r.TaskRef = axtype.TaskRef{ID: t.ID, Token: t.Token}
	done, err := db.WithTxV(ctx, w.pool, func(tx pgx.Tx) ([]axtype.CompletedTask, error) {
		return completeHTTPTask(ctx, tx, w.outbox, r, t.ExecutionID, t.Attempt, t.Priority, true)
	})
	if err != nil {
		return err
	}
	if len(done) == 0 {
		log.WarnContext(ctx, "http task result dropped: its lease ended first (deadline or cancel)")
		return w.wait(ctx, args)
	}
	countTaskResult(w.metrics, done[0])
	log.InfoContext(ctx, "http task completed", "state", done[0].State, "reported", r.State, "error", r.Error,
		"error_code", r.ErrorCode)
	return nil
}

// completeHTTPTask records r in tx (fenced by its token) and, when the
// task is retried, enqueues its next attempt (agentless) or wakes the
// agents' long polls (a task an agent sent, whose target answered 202),
// then flushes callbacks. The execution is locked first: shards
// completing at the same time would otherwise each see the others
// unfinished, and none would end it.
func completeHTTPTask(ctx context.Context, tx pgx.Tx, outbox *Outbox, r axtype.TaskResult, executionID uuid.UUID, attempt, priority int, agentless bool) ([]axtype.CompletedTask, error) {
	if err := db.ExecutionLock(ctx, tx, executionID); err != nil {
		return nil, err
	}
	done, err := db.TaskComplete(ctx, tx, []axtype.TaskResult{r})
	if err != nil || len(done) == 0 {
		return done, err
	}
	if done[0].State == axtype.TaskPending && agentless {
		next := HTTPTaskArgs{TaskID: r.ID, Attempt: attempt + 1, ExecutionID: done[0].ExecutionID}
		if err := outbox.insertHTTPAttempt(ctx, tx, next, priority); err != nil {
			return nil, err
		}
	} else if done[0].State == axtype.TaskPending {
		if err := db.Notify(ctx, tx, notify.TaskReadyChannel, ""); err != nil {
			return nil, err
		}
	}
	return done, outbox.Flush(ctx, tx)
}

func countTaskResult(m *metrics.Metrics, done axtype.CompletedTask) {
	if done.State == axtype.TaskPending {
		m.Retries.Inc()
		return
	}
	m.TaskResults.Inc(string(done.State), done.ErrorCode)
}
