package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/webhook"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// contractRequest is one HTTP task request a receiver verified.
type contractRequest struct {
	messageID string
	headers   http.Header
	envelope  map[string]any
}

// contractReceiver is a target of HTTP jobs on loopback that verifies
// every request with the receiver kit (webhook.Verifier's middleware)
// under the job's secret, records the verified ones and answers them 202.
type contractReceiver struct {
	*httptest.Server
	secret   atomic.Pointer[webhook.Secret]
	verified chan contractRequest
	mu       sync.Mutex
	refused  []string
}

func newContractReceiver(t *testing.T) *contractReceiver {
	t.Helper()
	c := &contractReceiver{verified: make(chan contractRequest, 4)}
	accept := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg, _ := webhook.MessageFromContext(r.Context())
		raw, _ := io.ReadAll(r.Body)
		var env map[string]any
		if err := json.Unmarshal(raw, &env); err != nil {
			http.Error(w, "the body is not the envelope", http.StatusBadRequest)
			return
		}
		c.verified <- contractRequest{messageID: msg.ID, headers: r.Header.Clone(), envelope: env}
		w.WriteHeader(http.StatusAccepted) // the result comes later, to the completion URL
	})
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secret := c.secret.Load()
		if secret == nil {
			http.Error(w, "no job yet", http.StatusServiceUnavailable)
			return
		}
		v := &webhook.Verifier{Secrets: []webhook.Secret{*secret}}
		rec := httptest.NewRecorder()
		v.Middleware(accept).ServeHTTP(rec, r)
		if rec.Code == http.StatusUnauthorized {
			c.mu.Lock()
			c.refused = append(c.refused, rec.Body.String())
			c.mu.Unlock()
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	t.Cleanup(c.Close)
	return c
}

// next waits for the next verified request.
func (c *contractReceiver) next(t *testing.T) contractRequest {
	t.Helper()
	select {
	case req := <-c.verified:
		return req
	case <-time.After(60 * time.Second):
		c.mu.Lock()
		defer c.mu.Unlock()
		t.Fatalf("no verified request within 60 s; refused: %q", c.refused)
		return contractRequest{}
	}
}

// complete posts a result to the completion URL of req with its token,
// as a target that answered 202 does, and returns the status.
func (c *contractReceiver) complete(t *testing.T, req contractRequest, result map[string]any) (int, map[string]any) {
	t.Helper()
	completion := req.envelope["completion"].(map[string]any)
	require.Equal(t, completion["url"], req.headers.Get("Ax-Completion-Url"))
	require.Equal(t, completion["token"], req.headers.Get("Ax-Completion-Token"))
	body, err := json.Marshal(map[string]any{"token": completion["token"], "state": "succeeded", "result": result})
	require.NoError(t, err)
	post, err := http.NewRequest(http.MethodPost, completion["url"].(string), bytes.NewReader(body))
	require.NoError(t, err)
	post.Header.Set("Content-Type", "application/json")
	post.Header.Set("Ax-Completion-Token", completion["token"].(string)) // no API key: the token is the credential
	resp, err := http.DefaultClient.Do(post)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// shape is the structure of a JSON value: its object keys, nested, with
// every other value replaced by its kind.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = shape(x)
		}
		return out
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return "array"
}

// TestHTTPTaskContractIsTheSameWhoeverSends: one job of kind http, run
// once without target labels (ax serve sends the request) and once after
// a PUT that adds target labels (a real ax-agent sends it), against one
// loopback receiver that verifies signatures with the receiver kit. Both
// requests verify under the job's secret, carry the same header names and
// the same envelope, are answered 202, and end the run when the receiver
// posts the result to the completion URL they carry.
func TestHTTPTaskContractIsTheSameWhoeverSends(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	s.RunAgent(t, "sender", s.URL, "AX_AGENT_LABELS=pool=contract")
	agentID := s.AgentReady(t, "sender")
	pool := e2ekit.OpenPool(t, s.DBURL)
	recv := newContractReceiver(t)

	job := map[string]any{"name": "contract", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": recv.URL + "/run", "headers": map[string]string{"X-Team": "billing"}},
		"retry":    map[string]any{"max_attempts": 1}, "timeout_seconds": 120}
	status, created := s.API(t, "POST", "/v1/jobs", job)
	require.Equal(t, http.StatusCreated, status, created)
	jobID := created["id"].(string)
	secret, err := webhook.ParseSecret(created["signing_secret"].(string))
	require.NoError(t, err)
	recv.secret.Store(&secret)

	// run triggers the job, takes its request, waits until ax holds the
	// 202 (awaited) and posts the result, and checks the run ends with it.
	run := func(sender string, awaited func(taskID string) bool) contractRequest {
		execID := s.Trigger(t, jobID)
		req := recv.next(t)
		require.Equal(t, execID, req.envelope["execution_id"], sender)
		taskID := req.envelope["task_id"].(string)
		require.Eventually(t, func() bool { return awaited(taskID) }, 30*time.Second, 50*time.Millisecond,
			"%s: ax awaits the 202's result", sender)
		status, reply := recv.complete(t, req, map[string]any{"via": sender})
		require.Equal(t, http.StatusOK, status, "%s: %v", sender, reply)
		require.Equal(t, "succeeded", reply["state"], sender)
		require.Equal(t, "succeeded", s.WaitExecution(t, execID, 60*time.Second), sender)
		_, exec := s.API(t, "GET", "/v1/executions/"+execID, nil)
		task := exec["tasks"].([]any)[0].(map[string]any)
		require.Equal(t, map[string]any{"via": sender}, task["result"], sender)
		status, again := recv.complete(t, req, map[string]any{"via": "twice"})
		require.Equal(t, http.StatusConflict, status, "%s: the token works once: %v", sender, again)
		return req
	}

	agentless := run("agentless", func(taskID string) bool {
		rows := tasksOfTask(t, pool, taskID)
		return rows.State == "running" && rows.AgentID == ""
	})
	job["target"] = map[string]any{"labels": map[string]string{"pool": "contract"}}
	status, updated := s.API(t, "PUT", "/v1/jobs/"+jobID, job)
	require.Equal(t, http.StatusOK, status, updated)
	onAgent := run("agent", func(taskID string) bool {
		// The agent reported the 202: the task is handed to its target,
		// held by no agent (its slot is free), awaiting the result.
		for _, e := range e2ekit.StateEvents(t, pool, taskID) {
			if strings.HasPrefix(e.Message, "accepted by its target (202)") {
				require.Equal(t, agentID, e.AgentID)
				row := tasksOfTask(t, pool, taskID)
				return row.State == "running" && row.AgentID == ""
			}
		}
		return false
	})

	recv.mu.Lock()
	require.Empty(t, recv.refused, "every request verifies")
	recv.mu.Unlock()
	for who, req := range map[string]contractRequest{"agentless": agentless, "agent": onAgent} {
		execID := req.envelope["execution_id"].(string)
		require.Equal(t, execID, req.messageID, "%s: webhook-id is the idempotency key", who)
		require.Equal(t, execID, req.headers.Get("Idempotency-Key"), who)
		require.Equal(t, execID, req.headers.Get("Ax-Execution-Id"), who)
		require.Equal(t, req.envelope["task_id"], req.headers.Get("Ax-Task-Id"), who)
		require.Equal(t, "billing", req.headers.Get("X-Team"), "%s: the job's headers", who)
		require.Equal(t, "application/json", req.headers.Get("Content-Type"), who)
		require.NotEmpty(t, req.headers.Get("traceparent"), who)
		require.Equal(t, s.URL+"/v1/tasks/"+req.envelope["task_id"].(string)+"/complete", req.headers.Get("Ax-Completion-Url"), who)
		require.Equal(t, jobID, req.envelope["job_id"], who)
		require.Equal(t, "contract", req.envelope["job_name"], who)
	}
	require.Equal(t, headerNames(agentless.headers), headerNames(onAgent.headers), "the same headers")
	require.Equal(t, shape(agentless.envelope), shape(onAgent.envelope), "the same envelope")
	require.True(t, strings.HasPrefix(agentless.headers.Get("User-Agent"), "ax/"), agentless.headers.Get("User-Agent"))
	require.True(t, strings.HasPrefix(onAgent.headers.Get("User-Agent"), "ax-agent/"), "only who sends it differs: %s",
		onAgent.headers.Get("User-Agent"))
}

// headerNames lists the names of h, sorted.
func headerNames(h http.Header) []string {
	return slices.Sorted(maps.Keys(h))
}

// tasksOfTask returns one task's row.
func tasksOfTask(t *testing.T, pool *pgxpool.Pool, taskID string) e2ekit.TaskRow {
	t.Helper()
	var r e2ekit.TaskRow
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT id::text, state::text, coalesce(agent_id::text, ''), attempt
		FROM ax.all_tasks WHERE id = $1`, taskID).Scan(&r.ID, &r.State, &r.AgentID, &r.Attempt))
	return r
}
