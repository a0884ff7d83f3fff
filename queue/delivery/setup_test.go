package delivery_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/queue/webhook"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

// outEnv is the engine with River running on a database of its own, and
// compressed timings: retries after 10..50 ms, breakers open for 300 ms.
type outEnv struct {
	t       *testing.T
	pool    *pgxpool.Pool
	river   *delivery.RiverService
	jobs    *queue.JobService
	execs   *queue.ExecutionService
	metrics *metrics.OutboundMetrics
	engine  *metrics.Metrics
}

// setup starts delivery (River) on a database of its own; mutate
// adjusts its configuration first.
func setup(t *testing.T, mutate func(*delivery.RiverConfig)) *outEnv {
	t.Helper()
	pool := dbtest.New(t)
	env := &outEnv{t: t, pool: pool, metrics: metrics.NewOutboundMetrics(nil), engine: metrics.New(nil)}
	cfg := delivery.RiverConfig{
		Policy: outbound.Policy{AllowLoopback: true, Timeout: 5 * time.Second},
		Callback: delivery.CallbackConfig{
			RetrySchedule: []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 30 * time.Millisecond,
				40 * time.Millisecond, 50 * time.Millisecond},
			Jitter: -1, BreakerThreshold: 100, BreakerOpenFor: 300 * time.Millisecond,
			HoldRecheck: 50 * time.Millisecond, BreakerProbeTimeout: 5 * time.Second,
		},
		HTTP:         delivery.HTTPTaskConfig{ReaperWait: 100 * time.Millisecond},
		PollInterval: 10 * time.Millisecond, FlushInterval: 200 * time.Millisecond,
		Metrics: env.engine, OutboundMetrics: env.metrics,
	}
	if mutate != nil {
		mutate(&cfg)
	}
	rs, err := delivery.NewRiverService(pool, cfg)
	require.NoError(t, err)
	require.NoError(t, rs.Start(context.Background()))
	t.Cleanup(rs.Stop)
	env.river = rs
	env.jobs = queue.NewJobService(pool, nil)
	env.execs = queue.NewExecutionService(pool, nil, env.engine).WithOutbox(rs.Outbox())
	return env
}

// job creates a manual job; mutate adjusts it first.
func (e *outEnv) job(mutate func(j *axtype.Job)) *axtype.Job {
	e.t.Helper()
	j := &axtype.Job{Name: "job-" + uuid.NewString()[:8], Group: "default", TriggerKind: axtype.TriggerManual, Timezone: "UTC",
		ExecutorKind: "shell", Executor: axtype.ExecutorConfig{Command: "true"}, RouteStrategy: "round_robin",
		ShardCount: 1, TimeoutSeconds: 60, RetryMaxAttempts: 1, RetryBackoffSeconds: 0, RetryBackoffMaxSeconds: 0,
		ConcurrencyPolicy: "allow", MisfirePolicy: "fire_once", MisfireWindowSeconds: 3600, MisfireMaxFires: 100,
		DegradeAction: "wait", ShardRangeTo: axtype.DefaultShardRangeTo}
	if mutate != nil {
		mutate(j)
	}
	created, err := e.jobs.Create(context.Background(), j)
	require.NoError(e.t, err)
	require.NotEmpty(e.t, created.SigningSecret)
	return created
}

// httpJob creates an agentless HTTP job calling url.
func (e *outEnv) httpJob(url string, mutate func(j *axtype.Job)) *axtype.Job {
	e.t.Helper()
	return e.job(func(j *axtype.Job) {
		j.ExecutorKind = "http"
		j.Executor = axtype.ExecutorConfig{URL: url, Method: "POST"}
		if mutate != nil {
			mutate(j)
		}
	})
}

func (e *outEnv) trigger(jobID uuid.UUID) *axtype.Execution {
	e.t.Helper()
	exec, _, err := e.execs.Trigger(context.Background(), &queue.TriggerRequest{JobID: jobID})
	require.NoError(e.t, err)
	return exec
}

// cancel ends an execution whose tasks are all pending: the quickest way
// to end one.
func (e *outEnv) cancel(id uuid.UUID) {
	e.t.Helper()
	exec, err := e.execs.Cancel(context.Background(), id, "test")
	require.NoError(e.t, err)
	require.Equal(e.t, axtype.ExecutionCancelled, exec.State)
}

func (e *outEnv) scalar(sql string, args ...any) any {
	e.t.Helper()
	var v any
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&v))
	return v
}

// eventually waits until the query returns want.
func (e *outEnv) eventually(want any, wait time.Duration, sql string, args ...any) {
	e.t.Helper()
	require.EventuallyWithT(e.t, func(c *assert.CollectT) {
		var last any
		require.NoError(c, e.pool.QueryRow(context.Background(), sql, args...).Scan(&last), sql)
		assert.Equal(c, want, last)
	}, wait, 10*time.Millisecond, "%s: still not %v after %s", sql, want, wait)
}

// settled waits until River has finished with the execution's callback
// (delivered or given up): no further attempt can come.
func (e *outEnv) settled(executionID uuid.UUID) {
	e.t.Helper()
	e.eventually("completed", 10*time.Second,
		"SELECT state::text FROM ax.river_job WHERE kind = 'ax_callback' AND args->>'execution_id' = $1::text", executionID)
}

// received is one request a receiver got.
type received struct {
	at     time.Time
	header http.Header
	body   []byte
}

// receiver is a loopback HTTP server that answers with what answer says
// for its n-th request (counting from 1); answer nil means 200.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int, w http.ResponseWriter, r *http.Request) bool // false: the response was written
}

func newReceiver(t *testing.T, answer func(n int, w http.ResponseWriter, r *http.Request) bool) *receiver {
	t.Helper()
	rc := &receiver{answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.got = append(rc.got, received{at: time.Now(), header: r.Header.Clone(), body: body})
	n := len(rc.got)
	rc.mu.Unlock()
	if rc.answer == nil || rc.answer(n, w, r) {
		w.WriteHeader(http.StatusOK)
	}
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

// hangUp drops the connection without an answer: the receiver is down.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = conn.Close()
	}
}

// verify checks a request's Standard Webhooks signature with secrets.
func verify(t *testing.T, r received, secrets ...string) webhook.Message {
	t.Helper()
	parsed, err := webhook.ParseSecrets(secrets...)
	require.NoError(t, err)
	msg, err := webhook.Verify(r.header, r.body, parsed...)
	require.NoError(t, err)
	return msg
}

// hostResolver maps test host names to addresses without DNS.
type hostResolver map[string]string

func (h hostResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	if addr, ok := h[host]; ok {
		return []net.IPAddr{{IP: net.ParseIP(addr)}}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// waitUntil polls cond until it holds (true) or wait passes (false), for
// goroutines that may not fail the test themselves.
func waitUntil(wait time.Duration, cond func() bool) bool {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for !cond() {
		select {
		case <-deadline:
			return cond()
		case <-tick.C:
		}
	}
	return true
}
