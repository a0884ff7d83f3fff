package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// Helpers of the process-level fault tests (issue #4): the results among a
// task's state events, and agents behind a recording proxy. (Servers,
// agents, the database seen through psql-like queries and the cleanup of
// what killed agents leave are e2ekit's.)

// results keeps the events that record a task's result: the final states.
func results(events []e2ekit.StateEvent) []e2ekit.StateEvent {
	var out []e2ekit.StateEvent
	for _, e := range events {
		switch e.State {
		case "succeeded", "failed", "cancelled", "timed_out":
			out = append(out, e)
		}
	}
	return out
}

// agentProxy stands between one ax-agent and the server, on loopback, and
// records every call of the agent protocol with the answer. A test learns
// from it what the agent really sent (was a result reported?) and the
// agent's own token, which the server shows only once, at registration.
type agentProxy struct {
	url string

	mu    sync.Mutex
	calls []proxiedCall
}

// proxiedCall is one request through the proxy and the server's answer.
type proxiedCall struct {
	Path      string
	Status    int
	Req, Resp []byte
	At        time.Time
}

type proxiedCallKey struct{}

func newAgentProxy(t *testing.T, target string) *agentProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &agentProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // calls cut short by a killed agent are expected
	rp.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		call := resp.Request.Context().Value(proxiedCallKey{}).(*proxiedCall)
		call.Status, call.Resp, call.At = resp.StatusCode, body, time.Now()
		p.mu.Lock()
		p.calls = append(p.calls, *call)
		p.mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		call := &proxiedCall{Path: r.URL.Path, Req: body}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxiedCallKey{}, call)))
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // a long poll of an agent still alive must not hold Close up
		srv.Close()
	})
	p.url = srv.URL
	return p
}

// callsTo returns the recorded calls whose path ends with suffix.
func (p *agentProxy) callsTo(suffix string) []proxiedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []proxiedCall
	for _, c := range p.calls {
		if strings.HasSuffix(c.Path, suffix) {
			out = append(out, c)
		}
	}
	return out
}

// credentials returns the agent id and token of the agent's last
// registration.
func (p *agentProxy) credentials(t *testing.T) (agentID, token string) {
	t.Helper()
	regs := p.callsTo("/v1/agents/register")
	require.NotEmpty(t, regs, "the agent registered through the proxy")
	last := regs[len(regs)-1]
	require.Equal(t, http.StatusCreated, last.Status, string(last.Resp))
	var creds struct {
		AgentID string `json:"agent_id"`
		Token   string `json:"token"`
	}
	require.NoError(t, json.Unmarshal(last.Resp, &creds))
	return creds.AgentID, creds.Token
}
