package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// A receiver down for three attempts (no answer, 500, 503) and then up
// gets the callback once, with the same webhook-id on every attempt, and
// every attempt is recorded.
func TestCallbackDeliveredOnceAfterReceiverRecovers(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) bool {
		switch n {
		case 1:
			hangUp(w)
		case 2:
			w.WriteHeader(http.StatusInternalServerError)
		case 3:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			return true
		}
		return false
	})
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL + "/hook" })
	exec := env.trigger(job.ID)
	env.cancel(exec.ID)

	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	env.settled(exec.ID) // nothing more comes
	got := rc.requests()
	require.Len(t, got, 4)
	for _, r := range got {
		msg := verify(t, r, job.SigningSecret)
		require.Equal(t, exec.ID.String(), msg.ID, "webhook-id is the execution id on every attempt")
		require.Equal(t, exec.TraceParent, r.header.Get("traceparent"))
		require.Equal(t, string(got[0].body), string(r.body), "the body is the same on every attempt")
	}
	var payload delivery.CallbackPayload
	require.NoError(t, json.Unmarshal(got[3].body, &payload))
	require.Equal(t, "cancelled", payload.State)
	require.Equal(t, job.ID.String(), payload.JobID)
	require.Equal(t, 1, payload.Shards.Total)
	require.Equal(t, map[string]int{"cancelled": 1}, payload.Shards.ByState)

	cb, err := delivery.NewCallbackService(env.pool, nil, nil).Get(context.Background(), exec.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.CallbackDelivered, cb.State)
	require.Len(t, cb.History, 4)
	require.Equal(t, []int{0, 500, 503, 200}, statuses(cb.History))
	require.NotEmpty(t, cb.History[0].Error, "no answer: the error says why")
	for i, a := range cb.History {
		require.Equal(t, i+1, a.Attempt)
		require.Equal(t, rc.URL+"/hook", a.URL)
	}
	require.Equal(t, 1.0, counterValue(env.metrics.CallbacksDelivered))
}

func statuses(h []axtype.CallbackAttempt) []int {
	out := make([]int, len(h))
	for i, a := range h {
		out[i] = a.StatusCode
	}
	return out
}

// A receiver that always fails gets the first attempt and five retries;
// then the callback is callback_failed and the alert metric moves.
func TestCallbackFailsAfterFiveRetries(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusInternalServerError)
		return false
	})
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL })
	exec := env.trigger(job.ID)
	env.cancel(exec.ID)

	env.eventually("callback_failed", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	env.settled(exec.ID)
	require.Len(t, rc.requests(), 6)
	require.EqualValues(t, 6, env.scalar("SELECT count(*) FROM ax.callback_attempt WHERE execution_id = $1", exec.ID))
	require.Equal(t, 1.0, counterValue(env.metrics.CallbacksFailed))
	require.EqualValues(t, 1, env.scalar("SELECT count(*) FROM ax.callbacks_failed"), "the operator view lists it")
	require.Equal(t, "callback_failed", env.scalar("SELECT state::text FROM ax.callbacks_failing WHERE execution_id = $1", exec.ID))

	// While a callback is still retrying, callbacks_failing lists it with
	// its next attempt (callbacks_failed does not): the row as it stood
	// between two attempts.
	_, err := env.pool.Exec(context.Background(), `UPDATE ax.callback SET state = 'pending', failed_at = NULL,
		next_attempt_at = now() + interval '1 hour' WHERE execution_id = $1`, exec.ID)
	require.NoError(t, err)
	require.EqualValues(t, 0, env.scalar("SELECT count(*) FROM ax.callbacks_failed"))
	require.Equal(t, "pending", env.scalar("SELECT state::text FROM ax.callbacks_failing WHERE execution_id = $1", exec.ID))
	require.EqualValues(t, 6, env.scalar("SELECT attempts FROM ax.callbacks_failing WHERE execution_id = $1", exec.ID))
}

// 429 with Retry-After: the next attempt waits that long, not the 10 ms
// of the (compressed) schedule.
func TestCallbackHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) bool {
		if n == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return false
		}
		return true
	})
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL })
	exec := env.trigger(job.ID)
	env.cancel(exec.ID)

	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	got := rc.requests()
	require.Len(t, got, 2)
	require.GreaterOrEqual(t, got[1].at.Sub(got[0].at), time.Second)
}

// A host that keeps failing opens its breaker: deliveries are held (no
// request reaches it) instead of retried and dropped; after the open time
// one probe goes alone, and its success closes the breaker and lets every
// held delivery through.
func TestCallbackBreakerOpensHoldsAndRecovers(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) {
		c.Callback.BreakerThreshold = 2
		c.Callback.BreakerOpenFor = time.Second
		c.Callback.RetrySchedule = []time.Duration{50 * time.Millisecond, 50 * time.Millisecond, 50 * time.Millisecond,
			50 * time.Millisecond, 50 * time.Millisecond}
	})
	const runs = 5
	held := func() float64 { return counterValue(env.metrics.CallbacksHeld) }
	var up atomic.Bool
	var upRequests, duringProbe atomic.Int32
	var probing, othersHeldDuringProbe atomic.Bool
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		if !up.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return false
		}
		if upRequests.Add(1) > 1 {
			if probing.Load() {
				duringProbe.Add(1)
			}
			return true
		}
		// The first request after recovery is the probe: keep it out
		// until every other delivery has looked and been held again.
		probing.Store(true)
		before := held()
		othersHeldDuringProbe.Store(waitUntil(5*time.Second, func() bool { return held() >= before+runs-1 }))
		probing.Store(false)
		return true
	})
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL })
	for range runs {
		env.cancel(env.trigger(job.ID).ID)
	}
	// Every delivery held: none is in flight, each waits for the open time.
	// (On a slow machine a probe may have gone since, and failed: it left
	// no earlier than the open_until read here, which it keeps or moves
	// later.)
	require.Eventually(t, func() bool { return held() >= runs }, 5*time.Second, 10*time.Millisecond)
	var openUntil time.Time
	require.NoError(t, env.pool.QueryRow(context.Background(), "SELECT open_until FROM ax.callback_breaker").Scan(&openUntil))
	sent := len(rc.requests())
	up.Store(true)

	env.eventually(int64(runs), 10*time.Second, "SELECT count(*) FROM ax.callback WHERE state = 'delivered'")
	got := rc.requests()
	require.False(t, got[sent].at.Before(openUntil),
		"an open breaker holds deliveries: nothing reaches the host before its open time is over")
	require.True(t, othersHeldDuringProbe.Load(), "the other deliveries looked while the probe was out")
	require.Zero(t, duringProbe.Load(), "half-open: one probe, nothing else while it is out")
	require.Equal(t, "closed", env.scalar("SELECT state::text FROM ax.callback_breaker"))
	require.EqualValues(t, 0, env.scalar("SELECT count(*) FROM ax.callback WHERE state = 'callback_failed'"),
		"held deliveries are delayed, never dropped")
	require.GreaterOrEqual(t, counterValue(env.metrics.BreakerChanges.WithLabelValues("open")), 1.0)
	require.Equal(t, 1.0, counterValue(env.metrics.BreakerChanges.WithLabelValues("closed")))
	require.Positive(t, counterValue(env.metrics.CallbacksHeld))
}

// A completion whose transaction rolls back announces nothing: the outbox
// row and its River job go with it. The same completion committed is
// announced.
func TestCallbackNeverSentForRolledBackCompletion(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, nil)
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL })
	exec := env.trigger(job.ID)
	task := leaseOne(t, env)
	result := []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task.ID, Token: task.LeaseToken}, State: "succeeded",
		Result: json.RawMessage(`{"rows":3}`)}}

	ctx := context.Background()
	tx, err := env.pool.Begin(ctx)
	require.NoError(t, err)
	_, err = db.TaskComplete(ctx, tx, result)
	require.NoError(t, err)
	require.NoError(t, env.river.Outbox().Flush(ctx, tx))
	var inTx int
	require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM ax.river_job WHERE kind = 'ax_callback'").Scan(&inTx))
	require.Equal(t, 1, inTx, "the job is inserted in the completing transaction")
	require.NoError(t, tx.Rollback(ctx))

	// What the periodic flush does (enqueue callbacks no hook did) finds
	// nothing either.
	require.NoError(t, db.WithTx(ctx, env.pool, func(tx pgx.Tx) error { return env.river.Outbox().Flush(ctx, tx) }))
	require.Empty(t, rc.requests())
	require.EqualValues(t, 0, env.scalar("SELECT count(*) FROM ax.callback"))
	require.EqualValues(t, 0, env.scalar("SELECT count(*) FROM ax.river_job WHERE kind = 'ax_callback'"))

	agents := dispatch.NewLeaseBroker(env.pool, nil, dispatch.AgentConfig{}, nil, nil).WithOutbox(env.river.Outbox())
	_, err = agents.Complete(ctx, task.AgentID, result)
	require.NoError(t, err)
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	var payload delivery.CallbackPayload
	require.NoError(t, json.Unmarshal(rc.requests()[0].body, &payload))
	require.Equal(t, "succeeded", payload.State)
	require.JSONEq(t, `{"rows":3}`, string(payload.Result))
}

// leasedTaskRef is a task leased by a test agent.
type leasedTaskRef struct {
	*axtype.LeasedTask
	AgentID uuid.UUID
}

func newID(t *testing.T) uuid.UUID {
	t.Helper()
	id, err := uuid.NewV7()
	require.NoError(t, err)
	return id
}

// leaseOne registers an agent and leases the one pending task.
func leaseOne(t *testing.T, env *outEnv) *leasedTaskRef {
	t.Helper()
	ctx := context.Background()
	key, err := db.APIKeyInsert(ctx, env.pool, &db.APIKeyInsertParams{ID: newID(t), Name: "agent",
		Hash: []byte(newID(t).String()), Prefix: "ax_", Scopes: []string{"agent"}})
	require.NoError(t, err)
	agent, err := db.AgentInsert(ctx, env.pool, &axtype.Agent{ID: newID(t), Name: "a1", Capacity: 4, Weight: 1, APIKeyID: key.ID,
		Executors: []string{"shell", "http", "handler"}})
	require.NoError(t, err)
	tasks, err := dispatch.Lease(ctx, env.pool, &dispatch.LeaseParams{AgentID: agent.ID, Max: 1, Lease: time.Minute,
		StealAfter: time.Second, StarveAfter: time.Hour, AgentExecutors: agent.Executors})
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	return &leasedTaskRef{LeasedTask: tasks[0], AgentID: agent.ID}
}

// While a secret is rotated both sign: a receiver holding either accepts.
func TestCallbackSignedWithBothSecretsDuringRotation(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, nil)
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL })
	secret := webhook.NewSecret().Text()
	until, err := db.JobSecretRotate(context.Background(), env.pool, job.ID, secret, time.Hour)
	require.NoError(t, err)
	require.NotEqual(t, job.SigningSecret, secret)
	require.WithinDuration(t, time.Now().Add(time.Hour), *until, time.Minute)
	exec := env.trigger(job.ID)
	env.cancel(exec.ID)

	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	r := rc.requests()[0]
	require.Len(t, r.header.Values("webhook-signature"), 1)
	require.Len(t, strings.Fields(r.header.Get("webhook-signature")), 2, "two signatures, one per valid secret")
	verify(t, r, job.SigningSecret)
	verify(t, r, secret)
}

// Redelivery sends the callback again (same webhook-id) as a new
// delivery, recorded after the first.
func TestCallbackRedeliver(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, nil)
	job := env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL })
	exec := env.trigger(job.ID)
	svc := delivery.NewCallbackService(env.pool, env.river.Outbox(), nil)
	_, err := svc.Redeliver(context.Background(), exec.ID)
	require.ErrorIs(t, err, delivery.ErrExecutionNotEnded)
	env.cancel(exec.ID)
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)

	cb, err := svc.Redeliver(context.Background(), exec.ID)
	require.NoError(t, err)
	require.Equal(t, 2, cb.Delivery)
	env.eventually(int32(2), 10*time.Second,
		"SELECT max(delivery) FROM ax.callback_attempt WHERE execution_id = $1 AND status_code = 200", exec.ID)
	got := rc.requests()
	require.Len(t, got, 2)
	require.Equal(t, verify(t, got[0], job.SigningSecret).ID, verify(t, got[1], job.SigningSecret).ID)

	other := env.job(nil) // no callback URL
	otherExec := env.trigger(other.ID)
	env.cancel(otherExec.ID)
	_, err = svc.Redeliver(context.Background(), otherExec.ID)
	require.ErrorIs(t, err, delivery.ErrNoCallbackURL)
}

// A callback URL whose host resolves to the cloud metadata service when
// the callback is sent is blocked at the connection: nothing is sent, and
// each attempt records why.
func TestCallbackBlockedWhenHostResolvesToMetadata(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) {
		c.Policy = outbound.Policy{AllowLoopback: true, AllowPrivate: true,
			Resolver: hostResolver{"hooks.example.test": "169.254.169.254"}}
	})
	job := env.job(func(j *axtype.Job) { j.CallbackURL = "http://hooks.example.test:8080/hook" })
	exec := env.trigger(job.ID)
	env.cancel(exec.ID)

	env.eventually("callback_failed", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	var msg string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT error FROM ax.callback_attempt WHERE execution_id = $1 ORDER BY id LIMIT 1", exec.ID).Scan(&msg))
	require.Contains(t, msg, "169.254.169.254, which is blocked: cloud metadata address")
}

// counterValue reads a counter.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// Every path that ends an execution announces it: a broadcast that finds
// no agent (ended as it is fired), the reaper (a lease that ran out with
// no attempt left), and a cancel while an agentless request is
// outstanding (no agent will report it, so the cancel ends it).
func TestCallbackForEveryWayAnExecutionEnds(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	rc := newReceiver(t, nil)
	ctx := context.Background()

	broadcast := env.job(func(j *axtype.Job) { j.CallbackURL, j.RouteStrategy = rc.URL, "broadcast" })
	none := env.trigger(broadcast.ID)
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", none.ID)
	require.Equal(t, "failed", env.scalar("SELECT state::text FROM ax.all_executions WHERE id = $1", none.ID))

	lost := env.trigger(env.job(func(j *axtype.Job) { j.CallbackURL = rc.URL }).ID)
	task := leaseOne(t, env)
	_, err := env.pool.Exec(ctx, "UPDATE ax.task SET lease_expires_at = now() - interval '1 second' WHERE id = $1", task.ID)
	require.NoError(t, err)
	reaper := dispatch.NewReaper(env.pool, dispatch.AgentConfig{}, dispatch.ReaperConfig{Outbox: env.river.Outbox()})
	require.NoError(t, reaper.Sweep(ctx))
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", lost.ID)
	require.Equal(t, "failed", env.scalar("SELECT state::text FROM ax.all_executions WHERE id = $1", lost.ID))

	slow := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusAccepted)
		return false
	})
	accepted := env.trigger(env.httpJob(slow.URL, func(j *axtype.Job) { j.CallbackURL = rc.URL }).ID)
	env.eventually(int32(1), 10*time.Second,
		"SELECT count(*)::int FROM ax.all_tasks WHERE execution_id = $1 AND state = 'running'", accepted.ID)
	env.cancel(accepted.ID)
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", accepted.ID)
	var states []string
	for _, r := range rc.requests() {
		var p delivery.CallbackPayload
		require.NoError(t, json.Unmarshal(r.body, &p))
		states = append(states, p.State)
	}
	require.ElementsMatch(t, []string{"failed", "failed", "cancelled"}, states)
}

// TestCallbackListsTheShardsItsByteBudgetHolds: a callback lists shards
// while their results and errors fit in MaxShardBytes (the first
// whatever its size), and says the list is truncated; all are counted.
// 1,000 shards of 200 KiB made a payload of 200 MB before, held several
// times over in memory by each delivery.
func TestCallbackListsTheShardsItsByteBudgetHolds(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.Callback.MaxShardBytes = 1000 })
	rc := newReceiver(t, nil)
	ctx := context.Background()
	job := env.job(func(j *axtype.Job) { j.CallbackURL, j.ShardCount = rc.URL, 6 })
	exec := env.trigger(job.ID)
	_, err := env.pool.Exec(ctx, `UPDATE ax.task SET result = jsonb_build_object('blob', repeat('x', 400))
		WHERE execution_id = $1`, exec.ID)
	require.NoError(t, err)
	env.cancel(exec.ID)
	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", exec.ID)
	got := rc.requests()
	require.Len(t, got, 1)
	var payload delivery.CallbackPayload
	require.NoError(t, json.Unmarshal(got[0].body, &payload))
	require.Equal(t, 6, payload.Shards.Total)
	require.True(t, payload.Shards.Truncated)
	var items []delivery.CallbackShard
	require.NoError(t, json.Unmarshal(payload.Shards.Items, &items))
	require.Len(t, items, 2, "two results of 412 bytes fit in 1,000; three do not")
	for i, s := range items {
		require.Equal(t, i, s.Index)
		require.Contains(t, string(s.Result), strings.Repeat("x", 400))
	}
}

// TestASlowReceiverHoldsNoOtherJobsCallbacks: with 4 callback workers and
// 2 deliveries a host at once, 6 callbacks to receivers on two ports of
// one host that do not answer yet hold 2 workers; another job's callback
// to another host is delivered meanwhile. Without the per-host bound the
// slow receivers' callbacks took every worker and the other waited for
// their answers.
func TestASlowReceiverHoldsNoOtherJobsCallbacks(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) {
		c.CallbackWorkers = 4
		c.Callback.MaxPerHost = 2
		c.Policy.Timeout = 30 * time.Second // the slow receiver's attempts do not time out meanwhile
	})
	release := make(chan struct{})
	var inFlight, most atomic.Int32
	hang := func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		return true
	}
	// Two slow receivers on two ports of one host: its slots are shared.
	slow, slow2 := newReceiver(t, hang), newReceiver(t, hang)
	defer close(release)
	fast := newReceiver(t, nil)
	// Slots are by host name: the other receiver is on another name (the
	// same loopback address).
	fastURL := strings.Replace(fast.URL, "127.0.0.1", "localhost", 1)
	for _, url := range []string{slow.URL, slow2.URL} {
		slowJob := env.job(func(j *axtype.Job) { j.CallbackURL = url })
		for range 3 {
			env.cancel(env.trigger(slowJob.ID).ID)
		}
	}
	require.True(t, waitUntil(10*time.Second, func() bool { return inFlight.Load() >= 2 }), "deliveries reach the slow receiver")
	other := env.trigger(env.job(func(j *axtype.Job) { j.CallbackURL = fastURL }).ID)
	env.cancel(other.ID)
	env.eventually("delivered", 5*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", other.ID)
	require.Len(t, fast.requests(), 1)
	require.EqualValues(t, 2, most.Load(), "at most two at once to the slow receivers' host")
}
