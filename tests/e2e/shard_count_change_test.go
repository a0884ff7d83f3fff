package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestShardCountChangeWhileARunIsUnfinished: a real ax serve. A run of a
// job with three shards is in flight (its agentless HTTP requests are
// held by the target) when the job's shards.count becomes 1. The change
// is accepted and safe: the run keeps the count it fired with — its three
// tasks are sent with Ax-Shard-Total 3 and keys <exec>:<i>, it ends
// succeeded with shard_count 3, and its callback lists three shards — and
// only the next run has one shard (key <exec>).
func TestShardCountChangeWhileARunIsUnfinished(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	release := make(chan struct{})
	var mu sync.Mutex
	var got []string // "<Ax-Shard-Total> <Idempotency-Key>" of each request
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Ax-Shard-Total")+" "+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		<-release
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(target.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	seen := func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), got...) }
	callbacks := newCallbackSink(t)

	job := s.CreateJob(t, map[string]any{"name": "reshard", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": target.URL}, "shards": map[string]any{"count": 3},
		"retry": map[string]any{"max_attempts": 1}, "callback": map[string]any{"url": callbacks.URL}})
	first := s.Trigger(t, job)
	require.Eventually(t, func() bool { return len(seen()) == 3 }, 30*time.Second, 20*time.Millisecond,
		"the three shards' requests are in flight")

	status, out := s.API(t, "PATCH", "/v1/jobs/"+job, map[string]any{"shards": map[string]any{"count": 1}})
	require.Equal(t, http.StatusOK, status, out)
	require.EqualValues(t, 1, out["shards"].(map[string]any)["count"])
	close(release)

	require.Equal(t, "succeeded", s.WaitExecution(t, first, 60*time.Second))
	require.ElementsMatch(t, []string{"3 " + first + ":0", "3 " + first + ":1", "3 " + first + ":2"}, seen())
	_, run := s.API(t, "GET", "/v1/executions/"+first, nil)
	require.EqualValues(t, 3, run["shard_count"])
	require.Len(t, run["tasks"], 3)
	for _, raw := range run["tasks"].([]any) {
		task := raw.(map[string]any)
		require.EqualValues(t, 3, task["shard_total"])
		require.Equal(t, fmt.Sprintf("%s:%v", first, task["shard_index"]), task["idempotency_key"])
	}
	var body map[string]any
	require.Eventually(t, func() bool { body = callbacks.body(first); return body != nil },
		30*time.Second, 50*time.Millisecond, "callback of the first run")
	shards := body["shards"].(map[string]any)
	require.EqualValues(t, 3, shards["total"])
	require.Len(t, shards["items"], 3)
	require.Equal(t, "succeeded", body["state"])

	second := s.Trigger(t, job)
	require.Equal(t, "succeeded", s.WaitExecution(t, second, 60*time.Second))
	_, run = s.API(t, "GET", "/v1/executions/"+second, nil)
	require.EqualValues(t, 1, run["shard_count"])
	require.Equal(t, "1 "+second, seen()[3], "the next run has the new count")
}
