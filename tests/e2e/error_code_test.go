package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// callbackSink records the callback bodies a loopback receiver gets.
type callbackSink struct {
	*httptest.Server
	mu     sync.Mutex
	bodies map[string]map[string]any // by execution id
}

func newCallbackSink(t *testing.T) *callbackSink {
	t.Helper()
	c := &callbackSink{bodies: map[string]map[string]any{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if json.Unmarshal(raw, &body) == nil {
			c.mu.Lock()
			c.bodies[r.Header.Get("webhook-id")] = body
			c.mu.Unlock()
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *callbackSink) body(execID string) map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bodies[execID]
}

// refusedAddr is a loopback address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestErrorCodesEndToEnd: real ax serve and ax-agent processes, loopback
// targets. A shell command that exits 3 and one that SIGKILLs itself, HTTP
// calls answered 503 and refused, both by the agent and by ax serve itself
// (agentless), end with their error codes in the API, `ax exec get`, the
// callback and ax_task_results_total.
func TestErrorCodesEndToEnd(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	s.RunAgent(t, "coder", s.URL, "AX_AGENT_LABELS=pool=codes")
	s.AgentReady(t, "coder")
	callbacks := newCallbackSink(t)
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "try again later", http.StatusServiceUnavailable)
	}))
	t.Cleanup(busy.Close)
	refused := "http://" + refusedAddr(t) + "/run"
	onAgent := map[string]any{"labels": map[string]string{"pool": "codes"}}

	cases := []struct {
		name     string
		executor map[string]any
		target   map[string]any // nil: agentless (ax serve sends HTTP jobs itself)
		code     string
	}{
		{"shell-exit-3", map[string]any{"kind": "shell", "command": "echo failing >&2; exit 3"}, onAgent, "exit_3"},
		{"shell-sigkill", map[string]any{"kind": "shell", "command": "kill -9 $$"}, onAgent, "signal_killed"},
		{"agent-http-503", map[string]any{"kind": "http", "url": busy.URL + "/run"}, onAgent, "http_503"},
		{"agent-http-refused", map[string]any{"kind": "http", "url": refused}, onAgent, "connect"},
		{"agentless-http-503", map[string]any{"kind": "http", "url": busy.URL + "/run"}, nil, "http_503"},
		{"agentless-http-refused", map[string]any{"kind": "http", "url": refused}, nil, "connect"},
	}
	before := scrape(t, s.URL)
	execs := make([]string, len(cases))
	for i, c := range cases {
		job := map[string]any{"name": c.name, "trigger": map[string]any{"kind": "manual"}, "executor": c.executor,
			"retry": map[string]any{"max_attempts": 1}, "callback": map[string]any{"url": callbacks.URL}}
		if c.target != nil {
			job["target"] = c.target
		}
		execs[i] = s.Trigger(t, s.CreateJob(t, job))
	}

	for i, c := range cases {
		require.Equal(t, "failed", s.WaitExecution(t, execs[i], 60*time.Second), c.name)
		_, exec := s.API(t, "GET", "/v1/executions/"+execs[i], nil)
		task := exec["tasks"].([]any)[0].(map[string]any)
		require.Equal(t, c.code, task["error_code"], "%s: %v", c.name, task)
		require.Equal(t, map[string]any{c.code: float64(1)}, exec["error_codes"], c.name)

		out, err := s.AX(t, "exec", "get", execs[i])
		require.NoError(t, err)
		require.Contains(t, out, " "+c.code+" ", c.name)
		require.Contains(t, out, "error codes: "+c.code+"=1", c.name)

		var body map[string]any
		require.Eventually(t, func() bool { body = callbacks.body(execs[i]); return body != nil },
			30*time.Second, 50*time.Millisecond, "%s: callback", c.name)
		require.Equal(t, c.code, body["error_code"], c.name)
		shards := body["shards"].(map[string]any)
		require.Equal(t, map[string]any{c.code: float64(1)}, shards["by_error_code"], c.name)
		require.Equal(t, c.code, shards["items"].([]any)[0].(map[string]any)["error_code"], c.name)
	}

	after := scrape(t, s.URL)
	want := map[string]float64{}
	for _, c := range cases {
		want[c.code]++
	}
	for code, n := range want {
		series := `ax_task_results_total{error_code="` + code + `",state="failed"}`
		require.Equal(t, before[series]+n, after[series], series)
	}
}
