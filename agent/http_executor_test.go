package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/webhook"
)

// received is what the receiver of an HTTP task saw.
type received struct {
	method  string
	path    string
	headers http.Header
	body    map[string]any
}

// receiver starts an HTTP server on 127.0.0.1 that records each request and
// answers with status and body.
func receiver(t *testing.T, status int, body string) (*httptest.Server, <-chan received) {
	t.Helper()
	got := make(chan received, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var decoded map[string]any
		_ = json.Unmarshal(raw, &decoded)
		got <- received{method: r.Method, path: r.URL.Path, headers: r.Header.Clone(), body: decoded}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// testSecret signs the HTTP tasks of these tests.
var testSecret = webhook.NewSecret()

func httpTask(url string) LeasedTask {
	return LeasedTask{TaskID: "task-9", ExecutionID: "exec-9", JobID: "job-9", JobName: "nine", ShardIndex: 4, ShardTotal: 8,
		ShardParam: "p4", Attempt: 2, LeaseToken: "tok", ScheduledFor: time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC),
		Deadline: time.Date(2024, 5, 1, 8, 15, 0, 0, time.UTC),
		Params:   json.RawMessage(`{"customer":"acme"}`), Executor: Executor{Kind: KindHTTP, URL: url},
		HTTP: &HTTPTask{SigningSecrets: SigningSecrets{testSecret.Text()}, CompletionURL: "http://ax.example/v1/tasks/task-9/complete"}}
}

func runHTTP(ctx context.Context, task LeasedTask) (json.RawMessage, error) {
	e := newHTTPExecutor(&http.Client{}, "test")
	return e.execute(ctx, task, nil, slog.New(slog.DiscardHandler))
}

func TestHTTPExecutorSendsTheSignedContract(t *testing.T) {
	t.Parallel()
	var raw []byte
	var headers http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ = io.ReadAll(r.Body)
		headers = r.Header.Clone()
		_, _ = io.WriteString(w, `{"rows": 12}`)
	}))
	t.Cleanup(srv.Close)
	task := httpTask(srv.URL + "/run")
	task.Executor.Headers = map[string]string{"X-Team": "billing", "Idempotency-Key": "overridden?"}
	task.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

	res, err := runHTTP(context.Background(), task)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows": 12}`, string(res))

	msg, err := webhook.Verify(headers, raw, testSecret)
	require.NoError(t, err, "signed with the job's secret")
	require.Equal(t, "exec-9:4", msg.ID)
	require.Equal(t, "exec-9:4", headers.Get("Idempotency-Key"), "ax's key wins over the job's header")
	require.Equal(t, "billing", headers.Get("X-Team"))
	require.Equal(t, task.TraceParent, headers.Get("traceparent"), "the run's trace goes on")
	require.Equal(t, "tok", headers.Get("Ax-Completion-Token"), "the lease token completes a 202")
	require.Equal(t, "ax-agent/test (http task)", headers.Get("User-Agent"))
	require.JSONEq(t, `{"execution_id": "exec-9", "job_id": "job-9", "job_name": "nine", "task_id": "task-9", "attempt": 2,
		"scheduled_for": "2024-05-01T08:00:00Z", "deadline": "2024-05-01T08:15:00Z",
		"shard": {"index": 4, "total": 8, "param": "p4"}, "params": {"customer": "acme"},
		"completion": {"url": "http://ax.example/v1/tasks/task-9/complete", "token": "tok"}}`, string(raw))
}

func TestHTTPExecutorConfiguredMethodAndBodyTemplate(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "done, thanks")
	task := httpTask(srv.URL)
	task.Executor.Method = "put"
	task.Executor.Body = `{"who": "{{.params.customer}}"}`

	res, err := runHTTP(context.Background(), task)
	require.NoError(t, err)
	require.JSONEq(t, `"done, thanks"`, string(res), "a body that is not JSON is kept as a string")
	r := <-got
	require.Equal(t, http.MethodPut, r.method)
	require.Equal(t, map[string]any{"who": "acme"}, r.body)
}

func TestHTTPExecutorReports202AsAccepted(t *testing.T) {
	t.Parallel()
	srv, _ := receiver(t, http.StatusAccepted, "queued")
	res, err := runHTTP(context.Background(), httpTask(srv.URL))
	require.ErrorIs(t, err, errAccepted)
	require.Nil(t, res)
	r := outcome(context.Background(), httpTask(srv.URL), res, err)
	require.Equal(t, StateAccepted, r.State)
	require.Empty(t, r.ErrorCode)
}

func TestHTTPExecutorFailsOnNon2xx(t *testing.T) {
	t.Parallel()
	srv, _ := receiver(t, http.StatusBadGateway, "upstream down")
	res, err := runHTTP(context.Background(), httpTask(srv.URL))
	require.EqualError(t, err, "HTTP 502 Bad Gateway: upstream down")
	require.Equal(t, "http_502", errorCodeOf(err))
	require.Nil(t, res)
}

func TestHTTPExecutorFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.RedirectHandler("/elsewhere", http.StatusFound))
	t.Cleanup(srv.Close)
	_, err := runHTTP(context.Background(), httpTask(srv.URL))
	require.ErrorIs(t, err, httptask.ErrRedirect)
	require.Equal(t, "connect", errorCodeOf(err))
}

func TestHTTPExecutorRefusesToSendUnsigned(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, "")
	task := httpTask(srv.URL)
	task.HTTP = nil
	_, err := runHTTP(context.Background(), task)
	require.ErrorIs(t, err, httptask.ErrNoSecret)
	require.Empty(t, got, "nothing was sent")
	shown := httpTask("x")
	require.NotContains(t, fmt.Sprintf("%v %+v %#v %v", shown, *shown.HTTP, *shown.HTTP, shown.HTTP.SigningSecrets),
		testSecret.Text(), "a task in a log line shows no secret")
}

func TestHTTPExecutorCapsResult(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("x", maxHTTPResultBytes*2) + `"`
	srv, _ := receiver(t, http.StatusOK, big)
	res, err := runHTTP(context.Background(), httpTask(srv.URL))
	require.NoError(t, err)
	var s string
	require.NoError(t, json.Unmarshal(res, &s), "a cut body is recorded as a string")
	require.Len(t, s, maxHTTPResultBytes)
}

func TestHTTPExecutorEmptyBodyNoResult(t *testing.T) {
	t.Parallel()
	srv, _ := receiver(t, http.StatusNoContent, "")
	res, err := runHTTP(context.Background(), httpTask(srv.URL))
	require.NoError(t, err)
	require.Nil(t, res)
}

func TestHTTPExecutorStopsOnContext(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := runHTTP(ctx, httpTask(srv.URL))
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestHTTPExecutorRejectsBadURL(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "ftp://x/y", "/relative", "http://"} {
		_, err := runHTTP(context.Background(), httpTask(u))
		require.ErrorContains(t, err, "no absolute http(s) URL", u)
	}
}
