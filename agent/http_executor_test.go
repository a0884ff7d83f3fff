package agent

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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

func httpTask(url string) LeasedTask {
	return LeasedTask{TaskID: "task-9", ExecutionID: "exec-9", JobID: "job-9", ShardIndex: 4, ShardTotal: 8,
		ShardParam: "p4", Attempt: 2, LeaseToken: "tok", ScheduledFor: time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC),
		Params: json.RawMessage(`{"customer":"acme"}`), Executor: Executor{Kind: KindHTTP, URL: url}}
}

func runHTTP(ctx context.Context, task LeasedTask) (json.RawMessage, error) {
	e := &httpExecutor{client: &http.Client{}}
	return e.execute(ctx, task, nil, slog.New(slog.DiscardHandler))
}

func TestHTTPExecutorPostsTaskWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusOK, `{"rows": 12}`)
	task := httpTask(srv.URL + "/run")
	task.Executor.Headers = map[string]string{"X-Team": "billing", "Idempotency-Key": "overridden?"}
	task.Executor.Body = `{"mode": "full"}`
	task.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

	res, err := runHTTP(context.Background(), task)
	require.NoError(t, err)
	require.JSONEq(t, `{"rows": 12}`, string(res))

	r := <-got
	require.Equal(t, http.MethodPost, r.method)
	require.Equal(t, "/run", r.path)
	require.Equal(t, "exec-9-4", r.headers.Get("Idempotency-Key"))
	require.Equal(t, "billing", r.headers.Get("X-Team"))
	require.Equal(t, task.TraceParent, r.headers.Get("traceparent"), "the run's trace goes on")
	require.Equal(t, "application/json", r.headers.Get("Content-Type"))
	require.Equal(t, map[string]any{
		"execution_id": "exec-9", "task_id": "task-9", "job_id": "job-9", "shard_index": 4.0, "shard_total": 8.0,
		"shard_param": "p4", "attempt": 2.0, "scheduled_for": "2024-05-01T08:00:00Z",
		"params": map[string]any{"customer": "acme"}, "body": map[string]any{"mode": "full"},
	}, r.body)
}

func TestHTTPExecutorConfiguredMethodAndTextBody(t *testing.T) {
	t.Parallel()
	srv, got := receiver(t, http.StatusAccepted, "queued, thanks")
	task := httpTask(srv.URL)
	task.Executor.Method = "put"
	task.Executor.Body = "plain words"

	res, err := runHTTP(context.Background(), task)
	require.NoError(t, err)
	require.JSONEq(t, `"queued, thanks"`, string(res), "a body that is not JSON is kept as a string")
	r := <-got
	require.Equal(t, http.MethodPut, r.method)
	require.Equal(t, "plain words", r.body["body"])
}

func TestHTTPExecutorFailsOnNon2xx(t *testing.T) {
	t.Parallel()
	srv, _ := receiver(t, http.StatusBadGateway, "upstream down")
	res, err := runHTTP(context.Background(), httpTask(srv.URL))
	require.Error(t, err)
	require.Contains(t, err.Error(), "502 Bad Gateway: upstream down")
	require.JSONEq(t, `{"status": 502}`, string(res))
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
