package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/webhook"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// noticeSink is a loopback webhook receiver that keeps only the notices
// whose Standard Webhooks signature verifies with its secret (set once
// the job that signs them exists), and counts the others.
type noticeSink struct {
	*httptest.Server
	mu       sync.Mutex
	secret   []webhook.Secret
	notices  []map[string]any
	rejected int
}

func newNoticeSink(t *testing.T) *noticeSink {
	t.Helper()
	s := &noticeSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, err := webhook.Verify(r.Header, body, s.secret...); err != nil {
			s.rejected++
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var n map[string]any
		if json.Unmarshal(body, &n) != nil || r.URL.Query().Get("token") != "s3cret" {
			s.rejected++
			http.Error(w, "bad notice", http.StatusBadRequest)
			return
		}
		s.notices = append(s.notices, n)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *noticeSink) events() (events []string, rejected int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, n := range s.notices {
		events = append(events, n["data"].(map[string]any)["event"].(string))
	}
	return events, s.rejected
}

// TestNoticeFailedThenRecovered: a real ax serve runs an agentless HTTP
// job against a target answering 500, with three attempts per run: its
// one run that fails (three failed attempts) sends exactly one failed
// notice, signed, to a receiver that verifies the signature; a second
// failed run sends none (same incident). With the target fixed, the next
// run succeeds and exactly one recovered notice follows. The notices API
// lists both, delivered, with the target URL's credentials redacted.
func TestNoticeFailedThenRecovered(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	var healthy atomic.Bool
	var attempts atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		attempts.Add(1)
		if !healthy.Load() {
			http.Error(w, "backend down", http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(target.Close)
	sink := newNoticeSink(t)

	status, created := s.API(t, "POST", "/v1/jobs", map[string]any{"name": "noticed", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": target.URL},
		"retry":    map[string]any{"max_attempts": 3, "backoff_seconds": 1, "backoff_max_seconds": 1}})
	require.Equal(t, http.StatusCreated, status, created)
	jobID := created["id"].(string)
	secret, err := webhook.ParseSecret(created["signing_secret"].(string))
	require.NoError(t, err)
	sink.mu.Lock()
	sink.secret = []webhook.Secret{secret}
	sink.mu.Unlock()

	hookURL := sink.URL + "/ax?token=s3cret"
	status, out := s.API(t, "PUT", "/v1/jobs/"+jobID+"/notice-targets", map[string]any{
		"targets": []any{map[string]any{"kind": "webhook", "url": hookURL, "events": []string{"failed", "recovered"}}}})
	require.Equal(t, http.StatusOK, status, out)
	shown := out["targets"].([]any)[0].(map[string]any)["url"].(string)
	require.NotContains(t, shown, "s3cret", "the URL's credentials are write-only")

	// Sent back as read, the redacted URL keeps the stored one.
	status, out = s.API(t, "PUT", "/v1/jobs/"+jobID+"/notice-targets", map[string]any{
		"targets": []any{map[string]any{"kind": "webhook", "url": shown, "events": []string{"failed", "recovered"}}}})
	require.Equal(t, http.StatusOK, status, out)

	require.Equal(t, "failed", s.WaitExecution(t, s.Trigger(t, jobID), 90*time.Second))
	require.EqualValues(t, 3, attempts.Load(), "three attempts")
	require.Eventually(t, func() bool { ev, _ := sink.events(); return len(ev) == 1 }, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, "failed", s.WaitExecution(t, s.Trigger(t, jobID), 90*time.Second), "a second failed run")

	healthy.Store(true)
	require.Equal(t, "succeeded", s.WaitExecution(t, s.Trigger(t, jobID), 90*time.Second))
	require.Eventually(t, func() bool { ev, _ := sink.events(); return len(ev) == 2 }, 60*time.Second, 50*time.Millisecond)
	require.Equal(t, "succeeded", s.WaitExecution(t, s.Trigger(t, jobID), 90*time.Second), "a second success")

	// Every notice the API knows of is settled: nothing more is coming.
	var listed []any
	require.Eventually(t, func() bool {
		status, out = s.API(t, "GET", "/v1/jobs/"+jobID+"/notices", nil)
		require.Equal(t, http.StatusOK, status, out)
		listed = out["notices"].([]any)
		for _, n := range listed {
			if n.(map[string]any)["state"] != "delivered" {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond)
	events, rejected := sink.events()
	require.Equal(t, []string{"failed", "recovered"}, events, "one notice per incident, not per attempt or run")
	require.Zero(t, rejected, "every notice verified")
	require.Len(t, listed, 2)
	recovered, failed := listed[0].(map[string]any), listed[1].(map[string]any)
	require.Equal(t, "recovered", recovered["event"])
	require.EqualValues(t, 2, recovered["failed_runs"])
	require.Equal(t, "failed", failed["event"])
	require.Contains(t, failed["detail"], "500")
	for _, n := range listed {
		n := n.(map[string]any)
		require.EqualValues(t, 1, n["attempts"])
		require.Equal(t, "webhook", n["target_kind"])
		require.NotContains(t, n["target_url"], "s3cret")
	}
}

// TestNoticeTargetsValidation: bad targets get a 422 problem naming the
// field, and change nothing. (Addresses are literal, public ones: no DNS.)
func TestNoticeTargetsValidation(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t) // loopback not allowed
	jobID := s.CreateJob(t, map[string]any{"name": "validated", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	path := "/v1/jobs/" + jobID + "/notice-targets"
	good := map[string]any{"kind": "slack", "url": "https://93.184.216.34/services/T0/B0/abc"}
	status, out := s.API(t, "PUT", path, map[string]any{"targets": []any{good}})
	require.Equal(t, http.StatusOK, status, out)

	many := make([]any, 11)
	for i := range many {
		many[i] = good
	}
	cases := map[string]struct {
		targets  []any
		location string
	}{
		"too many":      {many, "body.targets"},
		"unknown kind":  {[]any{map[string]any{"kind": "email", "url": "https://93.184.216.34/"}}, "body.targets[0].kind"},
		"not http":      {[]any{map[string]any{"kind": "webhook", "url": "ftp://93.184.216.34/x"}}, "body.targets[0].url"},
		"loopback":      {[]any{good, map[string]any{"kind": "webhook", "url": "http://127.0.0.1:9/x"}}, "body.targets[1].url"},
		"private":       {[]any{map[string]any{"kind": "webhook", "url": "http://10.1.2.3/x"}}, "body.targets[0].url"},
		"twice":         {[]any{good, good}, "body.targets[1].url"},
		"unknown event": {[]any{map[string]any{"kind": "slack", "url": "https://93.184.216.34/", "events": []string{"paged"}}}, "body.targets[0].events[0]"},
		"empty url":     {[]any{map[string]any{"kind": "slack", "url": ""}}, "body.targets[0].url"},
		"missing url":   {[]any{map[string]any{"kind": "slack"}}, "body.targets[0]"},
		"url too long":  {[]any{map[string]any{"kind": "slack", "url": "https://93.184.216.34/" + strings.Repeat("a", 2100)}}, "body.targets[0].url"},
	}
	for name, c := range cases {
		status, out := s.API(t, "PUT", path, map[string]any{"targets": c.targets})
		require.Equal(t, http.StatusUnprocessableEntity, status, "%s: %v", name, out)
		require.Contains(t, locations(out), c.location, "%s: %v", name, out)
	}

	// A redacted query value with no stored target behind it.
	status, out = s.API(t, "GET", path, nil)
	require.Equal(t, http.StatusOK, status, out)
	status, out = s.API(t, "PUT", path, map[string]any{"targets": []any{good,
		map[string]any{"kind": "webhook", "url": "https://93.184.216.35/x?token=s3cret"}}})
	require.Equal(t, http.StatusOK, status, out)
	redacted := out["targets"].([]any)[1].(map[string]any)["url"].(string)
	require.NotContains(t, redacted, "s3cret")
	status, out = s.API(t, "PUT", path, map[string]any{"targets": []any{
		map[string]any{"kind": "slack", "url": redacted}}})
	require.Equal(t, http.StatusUnprocessableEntity, status, "a slack target has no stored URL to restore: %v", out)
	require.Contains(t, locations(out), "body.targets[0].url", out)

	status, out = s.API(t, "GET", path, nil)
	require.Equal(t, http.StatusOK, status, out)
	require.Len(t, out["targets"], 2, "bad input changed nothing")
	status, out = s.API(t, "GET", "/v1/jobs/00000000-0000-7000-8000-000000000000/notice-targets", nil)
	require.Equal(t, http.StatusNotFound, status, out)
}

// locations lists the fields a problem names.
func locations(problem map[string]any) []string {
	var out []string
	errs, _ := problem["errors"].([]any)
	for _, e := range errs {
		if loc, ok := e.(map[string]any)["location"].(string); ok {
			out = append(out, loc)
		}
	}
	return out
}
