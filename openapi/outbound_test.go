package openapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/queue/webhook"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// setupRiver starts the API with River delivering callbacks and sending
// agentless HTTP tasks (loopback allowed, retries compressed), and the
// public URL targets complete 202 tasks at.
func setupRiver(t *testing.T) *apiEnv {
	t.Helper()
	pool := dbtest.New(t)
	notifier := notify.NewNotifier(pool, nil, notify.JobChangedChannel, notify.TaskReadyChannel, notify.ExecutionEndedChannel,
		notify.APIKeyRevokedChannel)
	require.NoError(t, notifier.Start(context.Background()))
	t.Cleanup(notifier.Stop)
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	policy := outbound.Policy{AllowLoopback: true, Timeout: 5 * time.Second}
	rs, err := delivery.NewRiverService(pool, delivery.RiverConfig{Policy: policy, PollInterval: 10 * time.Millisecond,
		HTTP:     delivery.HTTPTaskConfig{PublicURL: srv.URL},
		Callback: delivery.CallbackConfig{RetrySchedule: []time.Duration{10 * time.Millisecond}, Jitter: -1}})
	require.NoError(t, err)
	require.NoError(t, rs.Start(context.Background()))
	t.Cleanup(rs.Stop)
	handler, _ = openapi.New(openapi.Config{Version: "test", Outbound: policy,
		Engine: queue.NewEngine(queue.EngineConfig{Pool: pool, Notifier: notifier, Outbox: rs.Outbox()})})
	env := &apiEnv{t: t, pool: pool, url: srv.URL}
	env.admin = env.key(openapi.ScopeAdmin)
	return env
}

// hook is a loopback receiver that records requests and answers with
// status (200 when 0), and body.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	got    []*http.Request
	bodies [][]byte
	status int
	body   string
}

func newHook(t *testing.T, status int, body string) *hook {
	t.Helper()
	h := &hook{status: status, body: body}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.got, h.bodies = append(h.got, r), append(h.bodies, b)
		h.mu.Unlock()
		if h.status != 0 {
			w.WriteHeader(h.status)
		}
		_, _ = w.Write([]byte(h.body))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.got)
}

// An ad-hoc run of an agentless HTTP job: 202 with a status URL; a long
// poll answers once it has succeeded; its callback was delivered, signed
// with the secret the submission showed, and is shown with its attempts.
func TestRunSubmitWaitAndCallback(t *testing.T) {
	t.Parallel()
	env := setupRiver(t)
	target := newHook(t, http.StatusOK, `{"total":7}`)
	receiver := newHook(t, http.StatusNoContent, "")
	resp := env.call("POST", "/v1/runs", env.admin, map[string]any{
		"executor": map[string]any{"kind": "http", "url": target.URL + "/work"},
		"callback": map[string]any{"url": receiver.URL + "/ax"},
		"params":   map[string]any{"day": "2024-05-01"},
	})
	run := resp.must(t, http.StatusAccepted)
	exec := run["execution"].(map[string]any)
	statusURL := exec["status_url"].(string)
	require.Equal(t, "/v1/executions/"+exec["id"].(string), statusURL)
	require.Equal(t, statusURL, resp.header.Get("Location"))
	secret := run["signing_secret"].(string)
	require.True(t, strings.HasPrefix(secret, "whsec_"))

	start := time.Now()
	done := env.call("GET", statusURL+"?wait=20s", env.admin, nil).must(t, http.StatusOK)
	require.Less(t, time.Since(start), 10*time.Second)
	require.Equal(t, "succeeded", done["state"])
	require.JSONEq(t, `{"total":7}`, jsonOf(done["tasks"].([]any)[0].(map[string]any)["result"]))

	require.Eventually(t, func() bool {
		cb, _ := env.call("GET", statusURL, env.admin, nil).must(t, http.StatusOK)["callback"].(map[string]any)
		return cb != nil && cb["state"] == "delivered"
	}, 10*time.Second, 20*time.Millisecond)
	cb := env.call("GET", statusURL, env.admin, nil).must(t, http.StatusOK)["callback"].(map[string]any)
	attempts := cb["attempts"].([]any)
	require.Len(t, attempts, 1)
	require.Equal(t, float64(204), attempts[0].(map[string]any)["status_code"])
	parsed, err := webhook.ParseSecret(secret)
	require.NoError(t, err)
	receiver.mu.Lock()
	msg, err := webhook.Verify(receiver.got[0].Header, receiver.bodies[0], parsed)
	receiver.mu.Unlock()
	require.NoError(t, err)
	require.Equal(t, exec["id"], msg.ID)
}

// A long poll answers when the execution ends, well before its wait runs
// out, and a bad wait names the field. That the wake is the notification's,
// not the 2 s re-read's, is TestExecutionWaiterReturnsWhenTheExecutionEnds
// (queue), timed from the waiter's own last read: timed here, from the
// cancel's answer, it took 1.53 s on a loaded machine.
func TestLongPollWakesWhenTheExecutionEnds(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := env.call("POST", "/v1/jobs", env.admin, cronJob("poll", "0 0 * * *", "UTC")).must(t, http.StatusCreated)
	exec := env.trigger(job["id"].(string), "", "").must(t, http.StatusAccepted)
	statusURL := exec["status_url"].(string)

	env.call("GET", statusURL+"?wait=90s", env.admin, nil).must(t, http.StatusUnprocessableEntity)
	env.call("GET", statusURL+"?wait=soon", env.admin, nil).must(t, http.StatusUnprocessableEntity)
	quick := env.call("GET", statusURL+"?wait=200ms", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "pending", quick["state"], "the wait ran out: the state as it is")

	type answer struct {
		body map[string]any
		at   time.Time
	}
	got := make(chan answer, 1)
	go func() {
		r := env.call("GET", statusURL+"?wait=30s", env.admin, nil)
		got <- answer{r.body, time.Now()}
	}()
	time.Sleep(500 * time.Millisecond)
	env.call("POST", statusURL+"/cancel", env.admin, nil).must(t, http.StatusOK)
	cancelled := time.Now()
	a := <-got
	require.Equal(t, "cancelled", a.body["state"])
	require.Less(t, a.at.Sub(cancelled), 10*time.Second, "answered at the end, not when the 30 s wait ran out")
}

// A target that answered 202 posts its result with the completion token;
// the token works once, a wrong one is a conflict, no API key is needed.
func TestCompleteHTTPTaskEndpoint(t *testing.T) {
	t.Parallel()
	env := setupRiver(t)
	target := newHook(t, http.StatusAccepted, "")
	job := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "long-report", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": target.URL},
	}).must(t, http.StatusCreated)
	exec := env.trigger(job["id"].(string), "", "").must(t, http.StatusAccepted)
	require.Eventually(t, func() bool { return target.count() == 1 }, 10*time.Second, 10*time.Millisecond)
	target.mu.Lock()
	completeURL := target.got[0].Header.Get("Ax-Completion-Url")
	token := target.got[0].Header.Get("Ax-Completion-Token")
	target.mu.Unlock()
	require.True(t, strings.HasPrefix(completeURL, env.url+"/v1/tasks/"))
	path := strings.TrimPrefix(completeURL, env.url)

	env.call("POST", path, "", map[string]any{"token": uuid.NewString(), "state": "succeeded"}).must(t, http.StatusConflict)
	env.call("POST", path, "", map[string]any{"token": "nope", "state": "succeeded"}).must(t, http.StatusUnprocessableEntity)
	env.call("POST", "/v1/tasks/"+uuid.NewString()+"/complete", "", map[string]any{"token": token, "state": "succeeded"}).
		must(t, http.StatusNotFound)
	ok := env.call("POST", path, "", map[string]any{"token": token, "state": "succeeded", "result": map[string]any{"pages": 3}}).
		must(t, http.StatusOK)
	require.Equal(t, "succeeded", ok["state"])
	env.call("POST", path, "", map[string]any{"token": token, "state": "succeeded"}).must(t, http.StatusConflict)
	final := env.call("GET", exec["status_url"].(string)+"?wait=5s", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "succeeded", final["state"])
}

// Redelivery: 409 while the run is unfinished, then a new delivery.
func TestRedeliverCallbackEndpoint(t *testing.T) {
	t.Parallel()
	env := setupRiver(t)
	receiver := newHook(t, http.StatusOK, "")
	job := cronJob("announced", "0 0 * * *", "UTC")
	job["callback"] = map[string]any{"url": receiver.URL}
	id := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	exec := env.trigger(id, "", "").must(t, http.StatusAccepted)
	execURL := exec["status_url"].(string)
	env.call("POST", execURL+"/callback/redeliver", env.admin, nil).must(t, http.StatusConflict)
	env.call("POST", execURL+"/cancel", env.admin, nil).must(t, http.StatusOK)
	require.Eventually(t, func() bool { return receiver.count() == 1 }, 10*time.Second, 10*time.Millisecond)

	cb := env.call("POST", execURL+"/callback/redeliver", env.admin, nil).must(t, http.StatusAccepted)
	require.Equal(t, float64(2), cb["delivery"])
	require.Eventually(t, func() bool { return receiver.count() == 2 }, 10*time.Second, 10*time.Millisecond)
	env.call("POST", "/v1/executions/"+uuid.NewString()+"/callback/redeliver", env.admin, nil).must(t, http.StatusNotFound)
}

// The secret is shown when the job is made and when it is rotated, never
// on reads.
func TestSigningSecretShownOnceAndRotated(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := env.call("POST", "/v1/jobs", env.admin, cronJob("signed", "0 0 * * *", "UTC")).must(t, http.StatusCreated)
	first := job["signing_secret"].(string)
	require.True(t, strings.HasPrefix(first, "whsec_"))
	id := job["id"].(string)
	require.NotContains(t, env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK), "signing_secret")

	rotated := env.call("POST", "/v1/jobs/"+id+"/signing-secret/rotate", env.admin, map[string]any{"previous_valid_seconds": 60}).
		must(t, http.StatusOK)
	require.NotEqual(t, first, rotated["signing_secret"])
	until, err := time.Parse(time.RFC3339Nano, rotated["previous_valid_until"].(string))
	require.NoError(t, err)
	require.WithinDuration(t, time.Now().Add(time.Minute), until, 10*time.Second)
	env.call("POST", "/v1/jobs/"+uuid.NewString()+"/signing-secret/rotate", env.admin, nil).must(t, http.StatusNotFound)
}

// signedCall sends a request signed with keyID and secret at at.
func (e *apiEnv) signedCall(method, path string, body []byte, keyID uuid.UUID, secret string, at time.Time) (*http.Request, *response) {
	e.t.Helper()
	req, err := http.NewRequest(method, e.url+path, bytes.NewReader(body))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	signRequest(req, body, keyID, secret, at)
	return req, e.resend(req, body)
}

// resend sends req again, headers and body unchanged.
func (e *apiEnv) resend(req *http.Request, body []byte) *response {
	e.t.Helper()
	again := req.Clone(context.Background())
	again.Body = io.NopCloser(bytes.NewReader(body))
	return e.do(again)
}

// A signed request is accepted once: the same request again (a replay) is
// 401, as are a stale timestamp, a changed body and an unknown key, each
// with its reason.
func TestSignedRequestsAreReplayProof(t *testing.T) {
	t.Parallel()
	env := setup(t)
	ctx := context.Background()
	_, submitter, err := queue.NewKeyService(env.pool).Create(ctx, "signer", []string{openapi.ScopeSubmit}, queue.KeyLimits{})
	require.NoError(t, err)
	keyID, secret, err := queue.NewSigningKeyService(env.pool).Create(ctx, submitter.ID)
	require.NoError(t, err)
	body := []byte(jsonOf(cronJob("signed-job", "0 0 * * *", "UTC")))

	req, first := env.signedCall("POST", "/v1/jobs", body, keyID, secret, time.Now())
	first.must(t, http.StatusCreated)
	replay := env.resend(req, body)
	replay.must(t, http.StatusUnauthorized)
	require.Contains(t, replay.body["detail"], "nonce already used")
	require.Equal(t, 1, env.countJobs())

	_, stale := env.signedCall("GET", "/v1/jobs", nil, keyID, secret, time.Now().Add(-10*time.Minute))
	stale.must(t, http.StatusUnauthorized)
	require.Contains(t, stale.body["detail"], "stale timestamp")

	req, _ = env.signedCall("GET", "/v1/jobs", nil, keyID, secret, time.Now())
	req.Header.Set(openapi.HeaderNonce, "another-nonce-0123456789")
	changed := env.resend(req, nil)
	changed.must(t, http.StatusUnauthorized)
	require.Contains(t, changed.body["detail"], "signature does not match")

	_, unknown := env.signedCall("GET", "/v1/jobs", nil, uuid.New(), secret, time.Now())
	unknown.must(t, http.StatusUnauthorized)
	require.Contains(t, unknown.body["detail"], "unknown or revoked signing key")

	_, ok := env.signedCall("GET", "/v1/jobs?limit=5", nil, keyID, secret, time.Now())
	ok.must(t, http.StatusOK)
	_, forbidden := env.signedCall("POST", "/v1/agents/register", []byte(`{"name":"x","capacity":1}`), keyID, secret, time.Now())
	forbidden.must(t, http.StatusForbidden)
}

// Idempotency-Key on any mutating call: the same key and body replay the
// first answer (one job made), another body is 422. Runs keep the key in
// their own transaction: one execution.
func TestIdempotencyKeyOnAnyMutatingCall(t *testing.T) {
	t.Parallel()
	env := setup(t)
	post := func(path, key string, body any) *response {
		req, err := http.NewRequest("POST", env.url+path, strings.NewReader(jsonOf(body)))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+env.admin)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		return env.do(req)
	}
	job := cronJob("once", "0 0 * * *", "UTC")
	first := post("/v1/jobs", "create-once", job)
	created := first.must(t, http.StatusCreated)
	second := post("/v1/jobs", "create-once", job)
	replayed := second.must(t, http.StatusCreated)
	require.Equal(t, "", replayed["signing_secret"], "the secret is shown once")
	replayed["signing_secret"] = created["signing_secret"]
	require.Equal(t, created, replayed)
	require.Equal(t, "true", second.header.Get("Idempotent-Replayed"))
	require.Equal(t, first.header.Get("Location"), second.header.Get("Location"))
	require.Equal(t, 1, env.countJobs())
	job["description"] = "changed"
	mismatch := post("/v1/jobs", "create-once", job)
	mismatch.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"header.Idempotency-Key"}, mismatch.errorLocations())

	run := map[string]any{"executor": map[string]any{"kind": "shell", "command": "true"}}
	a := post("/v1/runs", "run-once", run).must(t, http.StatusAccepted)
	b := post("/v1/runs", "run-once", run).must(t, http.StatusAccepted)
	require.Equal(t, a["execution"].(map[string]any)["id"], b["execution"].(map[string]any)["id"])
	require.Empty(t, b["signing_secret"], "the secret is shown once")
	var n int
	require.NoError(t, env.pool.QueryRow(context.Background(), "SELECT count(*) FROM ax.all_executions").Scan(&n))
	require.Equal(t, 1, n)
}

// fixedResolver resolves test names to chosen addresses.
type fixedResolver map[string]string

func (r fixedResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	if a, ok := r[host]; ok {
		return []net.IPAddr{{IP: net.ParseIP(a)}}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// Callback and agentless HTTP URLs that lead to the metadata service, a
// private address, or a name resolving to one are refused with the field
// and the reason; jobs run by agents may call their own network.
func TestUnsafeURLsRefusedWhenSaved(t *testing.T) {
	t.Parallel()
	env := setupConfig(t, func(c *openapiConfig) {
		c.Outbound = outbound.Policy{AllowLoopback: true, Resolver: fixedResolver{"internal.test": "10.0.0.5"}}
	})
	withCallback := func(name, url string) map[string]any {
		j := cronJob(name, "0 0 * * *", "UTC")
		j["callback"] = map[string]any{"url": url}
		return j
	}
	for _, tc := range []struct {
		name, url, reason string
	}{
		{"metadata", "http://169.254.169.254/latest/meta-data", "cloud metadata address, always blocked"},
		{"private", "http://10.1.2.3/hook", "private address, allowed only with AllowPrivate"},
		{"resolves-private", "http://internal.test/hook", `host \"internal.test\" resolves to an address ax may not call`},
	} {
		r := env.call("POST", "/v1/jobs", env.admin, withCallback(tc.name, tc.url))
		r.must(t, http.StatusUnprocessableEntity)
		require.Equal(t, []string{"body.callback.url"}, r.errorLocations(), tc.name)
		require.Contains(t, string(r.raw), tc.reason, tc.name)
	}
	agentless := map[string]any{"name": "private-target", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": "http://192.168.1.10/run"}}
	r := env.call("POST", "/v1/jobs", env.admin, agentless)
	r.must(t, http.StatusUnprocessableEntity)
	require.Equal(t, []string{"body.executor.url"}, r.errorLocations())
	agentless["target"] = map[string]any{"labels": map[string]any{"pool": "billing"}}
	env.call("POST", "/v1/jobs", env.admin, agentless).must(t, http.StatusCreated)
	env.call("POST", "/v1/runs", env.admin, map[string]any{
		"executor": map[string]any{"kind": "http", "url": "http://169.254.169.254/"},
	}).must(t, http.StatusUnprocessableEntity)
	require.Equal(t, 1, env.countJobs())
}

// TestURLRefusalRevealsNoResolvedAddress: refusing a URL whose name
// resolves internally, or not at all, says so without the address the name
// resolved to or the resolver's own message: saving jobs is no way to map
// the internal network. The job is not saved.
func TestURLRefusalRevealsNoResolvedAddress(t *testing.T) {
	t.Parallel()
	env := setupConfig(t, func(c *openapiConfig) {
		c.Outbound = outbound.Policy{Resolver: fixedResolver{
			"db.internal.test": "10.20.30.40", "meta.internal.test": "169.254.169.254", "me.internal.test": "127.0.0.9",
			"nat.internal.test": "64:ff9b:1::a14:1e28"}}
	})
	for _, tc := range []struct{ host, hidden string }{
		{"db.internal.test", "10.20.30.40"},
		{"meta.internal.test", "169.254.169.254"},
		{"me.internal.test", "127.0.0.9"},
		{"nat.internal.test", "64:ff9b:1::a14:1e28"},
		{"missing.internal.test", "no such host"},
	} {
		var same string
		for _, field := range []string{"callback.url", "executor.url"} {
			job := map[string]any{"name": "probe", "trigger": map[string]any{"kind": "manual"},
				"executor": map[string]any{"kind": "shell", "command": "true"}}
			if field == "callback.url" {
				job["callback"] = map[string]any{"url": "http://" + tc.host + "/hook"}
			} else {
				job["executor"] = map[string]any{"kind": "http", "url": "http://" + tc.host + "/run"}
			}
			r := env.call("POST", "/v1/jobs", env.admin, job)
			r.must(t, http.StatusUnprocessableEntity)
			require.Equal(t, []string{"body." + field}, r.errorLocations(), tc.host)
			require.Contains(t, string(r.raw), `host \"`+tc.host+`\"`, "the refusal names the host")
			require.NotContains(t, string(r.raw), tc.hidden, "but not what it resolved to")
			for _, leak := range []string{"10.20", "169.254", "127.0", "a14:1e28", "lookup"} {
				require.NotContains(t, string(r.raw), leak, "%s: %s", tc.host, r.raw)
			}
			if tc.host != "missing.internal.test" { // nor which kind of address: one answer for all
				msg := strings.ReplaceAll(string(r.raw), tc.host, "HOST")
				msg = strings.NewReplacer(field, "FIELD", "/hook", "/PATH", "/run", "/PATH").Replace(msg)
				if same == "" {
					same = msg
				}
				require.Equal(t, same, msg)
			}
		}
	}
	require.Equal(t, 0, env.countJobs())
}

// signRequest sets the four headers of a signed request on req, whose
// body is body, at time at with a fresh nonce.
func signRequest(req *http.Request, body []byte, keyID uuid.UUID, secret string, at time.Time) {
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	n := base64.RawURLEncoding.EncodeToString(nonce)
	req.Header.Set(openapi.HeaderKeyID, keyID.String())
	req.Header.Set(openapi.HeaderTimestamp, strconv.FormatInt(at.Unix(), 10))
	req.Header.Set(openapi.HeaderNonce, n)
	req.Header.Set(openapi.HeaderSignature, openapi.RequestSignature(secret, req.Method, req.URL.EscapedPath(), req.URL.RawQuery, at.Unix(), n, body))
}

// stallingResolver never answers: a name server that does not respond.
// It counts the lookups it was asked for.
type stallingResolver struct{ lookups *atomic.Int32 }

func (r stallingResolver) LookupIPAddr(ctx context.Context, _ string) ([]net.IPAddr, error) {
	r.lookups.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestADeclarationChecksItsURLsWithinABound: a declaration's URLs are
// checked once each, all within 10 s. Forty jobs whose callbacks name
// hosts of a name server that never answers are refused within that
// bound (each URL named: not checked in time), and the same URL named by
// forty jobs is looked up once. Before, each lookup waited on the request's
// own context, so the declaration was answered never (hours, with a real
// resolver's timeouts, for 2,000 URLs).
func TestADeclarationChecksItsURLsWithinABound(t *testing.T) {
	t.Parallel()
	var lookups atomic.Int32
	env := setupConfig(t, func(c *openapiConfig) { c.Outbound = outbound.Policy{Resolver: stallingResolver{&lookups}} })
	jobs := func(host func(i int) string) []map[string]any {
		var out []map[string]any
		for i := range 40 {
			j := intervalJob(fmt.Sprintf("hooked-%d", i), 3600)
			j["callback"] = map[string]any{"url": "http://" + host(i) + "/hook"}
			out = append(out, j)
		}
		return out
	}
	began := time.Now()
	r := env.call("POST", "/v1/declarations", env.admin,
		declaration("sdk:hooks", "1", false, jobs(func(i int) string { return fmt.Sprintf("h%d.stalled.test", i) })...))
	r.must(t, http.StatusUnprocessableEntity)
	require.Less(t, time.Since(began), 20*time.Second)
	require.Len(t, r.errorLocations(), 40)
	require.Contains(t, string(r.raw), "took longer than 10s to check")

	lookups.Store(0)
	r = env.call("POST", "/v1/declarations", env.admin,
		declaration("sdk:hooks", "1", false, jobs(func(int) string { return "one.stalled.test" })...))
	r.must(t, http.StatusUnprocessableEntity)
	require.EqualValues(t, 1, lookups.Load(), "one URL, one lookup")
	require.Equal(t, 0, env.countJobs())
}

// slowResolver answers every name with a public address after delay.
type slowResolver struct{ delay time.Duration }

func (r slowResolver) LookupIPAddr(ctx context.Context, _ string) ([]net.IPAddr, error) {
	select {
	case <-time.After(r.delay):
		return []net.IPAddr{{IP: net.ParseIP("93.184.216.34")}}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestADeclarationLooksItsHostsUpAFewAtOnce: 80 callbacks on 80 hosts
// whose names take 300 ms each to look up are all checked within the
// 10 s bound (a few at once), and the declaration is applied. One after
// another they took 24 s, and the last ones were refused as not checked
// in time.
func TestADeclarationLooksItsHostsUpAFewAtOnce(t *testing.T) {
	t.Parallel()
	env := setupConfig(t, func(c *openapiConfig) { c.Outbound = outbound.Policy{Resolver: slowResolver{300 * time.Millisecond}} })
	var jobs []map[string]any
	for i := range 80 {
		j := intervalJob(fmt.Sprintf("hooked-%d", i), 3600)
		j["callback"] = map[string]any{"url": fmt.Sprintf("http://h%d.slow.test/hook", i)}
		jobs = append(jobs, j)
	}
	env.call("POST", "/v1/declarations", env.admin, declaration("sdk:slow", "1", false, jobs...)).must(t, http.StatusOK)
	require.Equal(t, 80, env.countJobs())
}
