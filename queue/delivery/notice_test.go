package delivery_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// setTargets points a job's notices at targets (all events).
func (e *outEnv) setTargets(jobID uuid.UUID, targets ...axtype.NoticeTarget) {
	e.t.Helper()
	ctx := context.Background()
	require.NoError(e.t, db.WithTx(ctx, e.pool, func(tx pgx.Tx) error { return db.NoticeTargetsSet(ctx, tx, jobID, targets) }))
}

// runEnds triggers a run of an agentless HTTP job and waits until it ends
// in state.
func (e *outEnv) runEnds(jobID uuid.UUID, state string) *axtype.Execution {
	e.t.Helper()
	exec := e.trigger(jobID)
	e.eventually(state, 15*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	return exec
}

// Five runs that fail for good (each after 2 attempts) make one incident:
// one failed notice per target, signed for the webhook, {"text"} for
// Slack; the next success closes it with one recovered notice that counts
// the five.
func TestNoticeOnePerIncident(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	var healthy atomic.Bool
	backend := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		if healthy.Load() {
			return true
		}
		http.Error(w, "database is down", http.StatusInternalServerError)
		return false
	})
	hook := newReceiver(t, nil)
	slack := newReceiver(t, nil)
	job := env.httpJob(backend.URL, func(j *axtype.Job) { j.RetryMaxAttempts = 2 })
	env.setTargets(job.ID, axtype.NoticeTarget{Kind: axtype.NoticeWebhook, URL: hook.URL + "/ax"},
		axtype.NoticeTarget{Kind: axtype.NoticeSlack, URL: slack.URL + "/services/T0/B0/x"})

	var first *axtype.Execution
	for i := range 5 {
		exec := env.runEnds(job.ID, "failed")
		if i == 0 {
			first = exec
		}
	}
	require.Len(t, backend.requests(), 10, "five runs of two attempts each")
	env.eventually(int64(2), 10*time.Second, "SELECT count(*) FROM ax.notice WHERE job_id = $1 AND state = 'delivered'", job.ID)
	require.EqualValues(t, 5, env.scalar("SELECT failed_runs FROM ax.notice_target WHERE job_id = $1 AND kind = 'webhook'", job.ID))

	healthy.Store(true)
	recovered := env.runEnds(job.ID, "succeeded")
	env.runEnds(job.ID, "succeeded") // a second success is no incident
	env.eventually(int64(4), 10*time.Second, "SELECT count(*) FROM ax.notice WHERE job_id = $1 AND state = 'delivered'", job.ID)
	require.EqualValues(t, 4, env.scalar("SELECT count(*) FROM ax.notice WHERE job_id = $1", job.ID))

	got := hook.requests()
	require.Len(t, got, 2)
	var events []string
	for _, r := range got {
		msg := verify(t, r, job.SigningSecret)
		require.True(t, strings.HasPrefix(msg.ID, "notice_"), msg.ID)
		var p delivery.NoticePayload
		require.NoError(t, json.Unmarshal(r.body, &p))
		require.Equal(t, job.ID, p.Data.JobID)
		require.Equal(t, "ax.notice."+p.Data.Event, p.Type)
		events = append(events, p.Data.Event)
		switch p.Data.Event {
		case "failed":
			require.Equal(t, first.ID, *p.Data.ExecutionID, "the run that opened the incident")
			require.Contains(t, p.Data.Detail, "500")
		case "recovered":
			require.Equal(t, recovered.ID, *p.Data.ExecutionID)
			require.Equal(t, 5, p.Data.FailedRuns)
		}
	}
	require.Equal(t, []string{"failed", "recovered"}, events)

	texts := slack.requests()
	require.Len(t, texts, 2)
	for i, want := range []string{"failed", "recovered after 5 failed run(s)"} {
		var body map[string]any
		require.NoError(t, json.Unmarshal(texts[i].body, &body))
		require.Len(t, body, 1, "Slack gets {\"text\": ...} only")
		require.Contains(t, body["text"], "ax: job "+job.Group+"/"+job.Name+" "+want)
		require.Empty(t, texts[i].header.Get("webhook-signature"), "Slack is not signed")
	}
}

// More notices to one URL than its rate lets through in a minute are
// recorded as rate_limited, not sent; the next one allowed (a new
// window) counts them.
func TestNoticeRateLimitPerTarget(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	_, err := env.pool.Exec(context.Background(), "UPDATE ax.notice_setting SET per_minute = 2")
	require.NoError(t, err)
	backend := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return false
	})
	hook := newReceiver(t, nil)
	var jobs []*axtype.Job
	for range 5 {
		j := env.httpJob(backend.URL, nil)
		env.setTargets(j.ID, axtype.NoticeTarget{Kind: axtype.NoticeWebhook, URL: hook.URL + "/shared"})
		jobs = append(jobs, j)
	}
	for _, j := range jobs[:4] {
		env.runEnds(j.ID, "failed")
	}
	env.eventually(int64(2), 10*time.Second, "SELECT count(*) FROM ax.notice WHERE state = 'delivered'")
	require.EqualValues(t, 2, env.scalar("SELECT count(*) FROM ax.notice WHERE state = 'rate_limited'"))

	// A minute later (the notices moved back instead of waiting), the
	// next notice goes and tells of the two held back.
	_, err = env.pool.Exec(context.Background(), "UPDATE ax.notice SET created_at = created_at - interval '61 seconds'")
	require.NoError(t, err)
	env.runEnds(jobs[4].ID, "failed")
	env.eventually(int64(3), 10*time.Second, "SELECT count(*) FROM ax.notice WHERE state = 'delivered'")
	got := hook.requests()
	require.Len(t, got, 3)
	var p delivery.NoticePayload
	require.NoError(t, json.Unmarshal(got[2].body, &p))
	require.Equal(t, 2, p.Data.Coalesced)
	require.Contains(t, p.Data.Text, "2 earlier notice(s) to this target held back by its rate limit")
	verify(t, got[2], jobs[4].SigningSecret)
}

// A callback given up sends callback_failed; a trigger set aside sends
// set_aside.
func TestNoticeCallbackFailedAndSetAside(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	down := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return false
	})
	hook := newReceiver(t, nil)
	job := env.job(func(j *axtype.Job) { j.CallbackURL = down.URL })
	env.setTargets(job.ID, axtype.NoticeTarget{Kind: axtype.NoticeWebhook, URL: hook.URL,
		Events: []axtype.NoticeEvent{axtype.NoticeCallbackFailed, axtype.NoticeSetAside}})
	exec := env.trigger(job.ID)
	env.cancel(exec.ID)
	env.eventually("callback_failed", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.notice WHERE job_id = $1 AND event = 'callback_failed'", job.ID)

	_, err := env.pool.Exec(context.Background(),
		"UPDATE ax.trigger SET set_aside_at = now(), set_aside_reason = 'cron cannot be evaluated' WHERE job_id = $1", job.ID)
	require.NoError(t, err)
	// No transaction of a run flushed this one: the periodic flush does.
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.notice WHERE job_id = $1 AND event = 'set_aside'", job.ID)
	got := hook.requests()
	require.Len(t, got, 2)
	var p delivery.NoticePayload
	require.NoError(t, json.Unmarshal(got[1].body, &p))
	require.Equal(t, "set_aside", p.Data.Event)
	require.Equal(t, "cron cannot be evaluated", p.Data.Detail)
}

// Transactions ending runs of the same jobs at once, listed in opposite
// orders, wait for each other instead of deadlocking (a deadlock would
// fail a run's end), and each run moves the incident once: the counts
// add up.
func TestNoticeConcurrentEndsDoNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	a := testfactory.Job(ctx, t, pool, nil)
	b := testfactory.Job(ctx, t, pool, nil)
	for _, j := range []*axtype.Job{a, b} {
		require.NoError(t, db.WithTx(ctx, pool, func(tx pgx.Tx) error {
			return db.NoticeTargetsSet(ctx, tx, j.ID, []axtype.NoticeTarget{{Kind: axtype.NoticeSlack, URL: "http://198.51.100.7/shared"}})
		}))
	}
	const workers, rounds = 6, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				jobs := []uuid.UUID{a.ID, b.ID}
				if w%2 == 1 {
					jobs = []uuid.UUID{b.ID, a.ID}
				}
				_, err := pool.Exec(ctx, "SELECT ax.notice_runs_ended($1, $2, $3, $4)",
					[]uuid.UUID{uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())}, jobs,
					[]string{"failed", "failed"}, []string{"boom", "boom"})
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	var runs []int32
	rows, err := pool.Query(ctx, "SELECT failed_runs FROM ax.notice_target ORDER BY job_id")
	require.NoError(t, err)
	for rows.Next() {
		var n int32
		require.NoError(t, rows.Scan(&n))
		runs = append(runs, n)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []int32{workers * rounds, workers * rounds}, runs, "every failed run counted once, one incident each")
	var notices int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM ax.notice").Scan(&notices))
	require.Equal(t, 2, notices, "one failed notice per job")
}

// Notices take the callbacks' slots per host: they share the callback
// workers, and notices to a receiver that answers slowly (2xx, no breaker
// trips) held every worker, so other jobs' callbacks waited. With 4
// workers and 2 slots a host, six notices hung at one host leave room for
// another job's callback, delivered within 5 s; before, it stayed pending.
func TestSlowNoticesHoldNoOtherJobsCallbacks(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) {
		c.CallbackWorkers = 4
		c.Callback.MaxPerHost = 2
		c.Policy.Timeout = 30 * time.Second
	})
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	slow := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		return true
	})
	defer close(release)
	backend := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return false
	})
	for i := range 6 {
		j := env.httpJob(backend.URL, nil)
		env.setTargets(j.ID, axtype.NoticeTarget{Kind: axtype.NoticeWebhook, URL: fmt.Sprintf("%s/hook%d", slow.URL, i)})
		env.runEnds(j.ID, "failed")
	}
	require.True(t, waitUntil(10*time.Second, func() bool { return inFlight.Load() >= 2 }), "notices reach the slow receiver")
	fast := newReceiver(t, nil)
	fastURL := strings.Replace(fast.URL, "127.0.0.1", "localhost", 1)
	other := env.trigger(env.job(func(j *axtype.Job) { j.CallbackURL = fastURL }).ID)
	env.cancel(other.ID)
	env.eventually("delivered", 5*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", other.ID)
	require.Len(t, fast.requests(), 1)
	require.EqualValues(t, 2, most.Load(), "at most two at once to the slow receiver's host")
}
