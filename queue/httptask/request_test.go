package httptask_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/webhook"
)

func task(t *testing.T) (*httptask.Task, webhook.Secret) {
	t.Helper()
	secret := webhook.NewSecret()
	return &httptask.Task{TaskID: "0190a6c4-0000-7000-8000-000000000002", ExecutionID: "0190a6c4-0000-7000-8000-000000000001",
		JobID: "0190a6c4-0000-7000-8000-000000000003", JobName: "nightly", ShardIndex: 2, ShardTotal: 4, ShardParam: "eu",
		Attempt: 3, ScheduledFor: time.Date(2024, 5, 1, 8, 0, 0, 0, time.UTC), Deadline: time.Date(2024, 5, 1, 8, 15, 0, 0, time.UTC),
		Params: json.RawMessage(`{"day":"2024-05-01","n":12345678901234567890}`), TraceParent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
		URL: "https://target.example/run", Headers: map[string]string{"X-Team": "billing", "Idempotency-Key": "mine", "Ax-Attempt": "99"},
		Secrets: []webhook.Secret{secret}, CompletionURL: httptask.CompletionURL("https://ax.example/", "0190a6c4-0000-7000-8000-000000000002"),
		CompletionToken: "0190a6c4-0000-7000-8000-0000000000ff"}, secret
}

func TestNewRequestIsSignedEnvelopeWithAxHeaders(t *testing.T) {
	t.Parallel()
	tk, secret := task(t)
	now := time.Now()
	req, err := httptask.NewRequest(context.Background(), tk, "ax/test (http task)", now)
	require.NoError(t, err)
	require.Equal(t, http.MethodPost, req.Method)
	body, err := io.ReadAll(req.Body)
	require.NoError(t, err)

	msg, err := webhook.Verify(req.Header, body, secret)
	require.NoError(t, err, "the receiver kit verifies it")
	require.Equal(t, tk.ExecutionID+":2", msg.ID, "webhook-id is the idempotency key")
	require.Equal(t, now.Unix(), msg.Timestamp.Unix())
	want := map[string]string{
		"Idempotency-Key": tk.ExecutionID + ":2", "Ax-Execution-Id": tk.ExecutionID, "Ax-Task-Id": tk.TaskID,
		"Ax-Shard-Index": "2", "Ax-Shard-Total": "4", "Ax-Attempt": "3", "Ax-Deadline": "2024-05-01T08:15:00Z",
		"Ax-Completion-Url": "https://ax.example/v1/tasks/" + tk.TaskID + "/complete", "Ax-Completion-Token": tk.CompletionToken,
		"Traceparent": tk.TraceParent, "User-Agent": "ax/test (http task)", "Content-Type": "application/json",
		"X-Team": "billing",
	}
	for name, value := range want {
		require.Equal(t, value, req.Header.Get(name), name)
	}
	require.JSONEq(t, `{"execution_id": "`+tk.ExecutionID+`", "job_id": "`+tk.JobID+`", "job_name": "nightly",
		"task_id": "`+tk.TaskID+`", "attempt": 3, "scheduled_for": "2024-05-01T08:00:00Z", "deadline": "2024-05-01T08:15:00Z",
		"shard": {"index": 2, "total": 4, "param": "eu"}, "params": {"day": "2024-05-01", "n": 12345678901234567890},
		"completion": {"url": "https://ax.example/v1/tasks/`+tk.TaskID+`/complete", "token": "`+tk.CompletionToken+`"}}`,
		string(body))
}

func TestIdempotencyKeyOfOneShardIsTheExecution(t *testing.T) {
	t.Parallel()
	require.Equal(t, "e1", httptask.IdempotencyKey("e1", 0, 1))
	require.Equal(t, "e1:0", httptask.IdempotencyKey("e1", 0, 2))
	require.Equal(t, "", httptask.CompletionURL("", "t1"), "no public URL, no completion")
}

func TestNewRequestRendersTheBodyTemplateOverTheEnvelope(t *testing.T) {
	t.Parallel()
	tk, secret := task(t)
	tk.Method = "put"
	tk.BodyTemplate = `{"region": "{{.shard.param}}", "params": {{json .params}}, "run": "{{.execution_id}}"}`
	tk.Headers = map[string]string{"Content-Type": "application/vnd.team+json"}
	req, err := httptask.NewRequest(context.Background(), tk, "ax-agent/test (http task)", time.Now())
	require.NoError(t, err)
	body, _ := io.ReadAll(req.Body)
	_, err = webhook.Verify(req.Header, body, secret)
	require.NoError(t, err)
	require.Equal(t, http.MethodPut, req.Method)
	require.Equal(t, "application/vnd.team+json", req.Header.Get("Content-Type"), "the job's content type stays")
	require.JSONEq(t, `{"region": "eu", "params": {"day": "2024-05-01", "n": 12345678901234567890}, "run": "`+tk.ExecutionID+`"}`,
		string(body))
}

func TestNewRequestGetHasNoBodyAndOneShardKey(t *testing.T) {
	t.Parallel()
	tk, secret := task(t)
	tk.Method, tk.ShardIndex, tk.ShardTotal, tk.CompletionURL = http.MethodGet, 0, 1, ""
	req, err := httptask.NewRequest(context.Background(), tk, "ax/test", time.Now())
	require.NoError(t, err)
	body, _ := io.ReadAll(req.Body)
	require.Empty(t, body)
	require.Empty(t, req.Header.Get("Content-Type"))
	require.Empty(t, req.Header.Get("Ax-Completion-Url"), "no public URL: no completion")
	require.Empty(t, req.Header.Get("Ax-Completion-Token"))
	msg, err := webhook.Verify(req.Header, body, secret)
	require.NoError(t, err)
	require.Equal(t, tk.ExecutionID, msg.ID)
}

func TestNewRequestRefusesWhatItCannotSendSigned(t *testing.T) {
	t.Parallel()
	tk, _ := task(t)
	tk.Secrets = nil
	_, err := httptask.NewRequest(context.Background(), tk, "ax/test", time.Now())
	require.ErrorIs(t, err, httptask.ErrNoSecret)
	for _, u := range []string{"", "ftp://x/y", "/relative", "http://"} {
		tk, _ := task(t)
		tk.URL = u
		_, err := httptask.NewRequest(context.Background(), tk, "ax/test", time.Now())
		require.ErrorContains(t, err, "no absolute http(s) URL", u)
	}
}

func TestAnswerOutcomes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status  int
		body    string
		outcome httptask.Outcome
		result  string
	}{
		{200, `{"rows": 3}`, httptask.Succeeded, `{"rows": 3}`},
		{204, ``, httptask.Succeeded, ``},
		{201, `made it`, httptask.Succeeded, `"made it"`},
		{202, `queued`, httptask.Accepted, `"queued"`},
		{302, ``, httptask.Failed, ``},
		{503, `busy`, httptask.Failed, `"busy"`},
	}
	for _, c := range cases {
		a := httptask.Answer{Status: c.status, Body: []byte(c.body)}
		require.Equal(t, c.outcome, a.Outcome(), c.status)
		require.Equal(t, c.result, string(a.Result()), c.status)
	}
	a := httptask.Answer{Status: 503, Body: []byte("busy")}
	require.Equal(t, "http_503", a.ErrorCode())
	require.Equal(t, "HTTP 503 Service Unavailable: busy", a.Error())
	cut := httptask.Answer{Status: 200, Body: []byte(`{"a": 1`), Truncated: true}
	require.Equal(t, `"{\"a\": 1"`, string(cut.Result()), "a cut body is kept as a string")
	require.Equal(t, "timeout", httptask.TransportErrorCode(context.DeadlineExceeded))
	require.Equal(t, "connect", httptask.TransportErrorCode(io.ErrUnexpectedEOF))
}

// TestImportsNoServerSide: agents import this package, and an agent never
// holds database credentials nor the server's packages.
func TestImportsNoServerSide(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/ax-scheduler/ax/queue/httptask").Output()
	require.NoError(t, err)
	for _, dep := range strings.Fields(string(out)) {
		if strings.HasPrefix(dep, "github.com/ax-scheduler/ax/") {
			require.Contains(t, []string{"github.com/ax-scheduler/ax/queue/httptask",
				"github.com/ax-scheduler/ax/queue/webhook", "github.com/ax-scheduler/ax/queue/jobtemplate"}, dep)
		}
		require.NotContains(t, dep, "jackc/pgx", "httptask must not reach the database")
	}
}
