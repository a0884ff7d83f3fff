package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/agent"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// runHandlerAgent runs an SDK agent in this process whose handler "key"
// answers the task's IdempotencyKey, until the test ends.
func runHandlerAgent(t *testing.T, s *e2ekit.Server, name, pool string) {
	t.Helper()
	out, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "create", "--scope", "agent").Output()
	require.NoError(t, err)
	a, err := agent.New(agent.Config{URL: s.URL, InsecureHTTP: true, Key: strings.TrimSpace(string(out)), Name: name,
		Labels: map[string]string{"pool": pool}, Executors: []string{agent.KindHandler},
		Logger: slog.New(slog.DiscardHandler), DrainGrace: time.Second})
	require.NoError(t, err)
	a.Handle("key", func(_ context.Context, task agent.Task) (agent.Result, error) {
		return map[string]string{"key": task.IdempotencyKey()}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
}

// TestOneIdempotencyKeyPerTask: a real ax serve, a real ax-agent (HTTP
// executor), an SDK agent with a Go handler and loopback receivers. For a
// run of one shard and a run of two, the key a Go handler gets from
// Task.IdempotencyKey, the Idempotency-Key (and webhook-id) of the HTTP
// request an agent sends and of the one ax serve sends itself, and the
// shard's idempotency_key in the callback and in the API are one and the
// same:
// "<execution id>" for one shard, "<execution id>:<shard index>" for more.
func TestOneIdempotencyKeyPerTask(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	s.RunAgent(t, "keys-http", s.URL, "AX_AGENT_LABELS=pool=keys-http")
	s.AgentReady(t, "keys-http")
	runHandlerAgent(t, s, "keys-handler", "keys-handler")
	s.AgentReady(t, "keys-handler")
	// The HTTP target answers the keys it was sent.
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{
			"key": r.Header.Get("Idempotency-Key"), "webhook_id": r.Header.Get("webhook-id")})
	}))
	t.Cleanup(target.Close)
	callbacks := newCallbackSink(t)

	senders := []struct {
		name     string
		executor map[string]any
		target   map[string]any // nil: agentless
		both     bool           // the result holds webhook_id too
	}{
		{"go-handler", map[string]any{"kind": "handler", "handler": "key"}, map[string]any{"labels": map[string]string{"pool": "keys-handler"}}, false},
		{"agent-http", map[string]any{"kind": "http", "url": target.URL}, map[string]any{"labels": map[string]string{"pool": "keys-http"}}, true},
		{"agentless-http", map[string]any{"kind": "http", "url": target.URL}, nil, true},
	}
	for _, sender := range senders {
		for _, shards := range []int{1, 2} {
			name := fmt.Sprintf("%s-%d", sender.name, shards)
			job := map[string]any{"name": name, "trigger": map[string]any{"kind": "manual"}, "executor": sender.executor,
				"shards": map[string]any{"count": shards}, "retry": map[string]any{"max_attempts": 1},
				"callback": map[string]any{"url": callbacks.URL}}
			if sender.target != nil {
				job["target"] = sender.target
			}
			execID := s.Trigger(t, s.CreateJob(t, job))
			require.Equal(t, "succeeded", s.WaitExecution(t, execID, 60*time.Second), name)

			want := map[int]string{}
			for i := range shards {
				want[i] = execID
				if shards > 1 {
					want[i] = fmt.Sprintf("%s:%d", execID, i)
				}
			}
			_, run := s.API(t, "GET", "/v1/executions/"+execID, nil)
			for _, raw := range run["tasks"].([]any) {
				task := raw.(map[string]any)
				i := int(task["shard_index"].(float64))
				result := task["result"].(map[string]any)
				require.Equal(t, want[i], result["key"], "%s shard %d: the key its sender used", name, i)
				require.Equal(t, want[i], task["idempotency_key"], "%s shard %d: the key the API shows", name, i)
				if sender.both {
					require.Equal(t, want[i], result["webhook_id"], "%s shard %d: webhook-id", name, i)
				}
			}
			var body map[string]any
			require.Eventually(t, func() bool { body = callbacks.body(execID); return body != nil },
				30*time.Second, 50*time.Millisecond, "%s: callback", name)
			items := body["shards"].(map[string]any)["items"].([]any)
			require.Len(t, items, shards, name)
			for _, raw := range items {
				item := raw.(map[string]any)
				i := int(item["index"].(float64))
				require.Equal(t, want[i], item["idempotency_key"], "%s shard %d: the callback's key", name, i)
			}
		}
	}
}
