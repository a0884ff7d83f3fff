package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/stretchr/testify/require"
)

// leasedTask triggers a manual shell job and leases its one task as agent a.
func leasedTask(t *testing.T, env *apiEnv, a *agentClient) map[string]any {
	t.Helper()
	job := env.call("POST", "/v1/jobs", env.admin, map[string]any{"name": "logs", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}}).must(t, http.StatusCreated)
	env.trigger(job["id"].(string), "", "").must(t, http.StatusAccepted)
	tasks := a.lease(1, 5)
	require.Len(t, tasks, 1)
	return tasks[0]
}

func logChunk(task map[string]any, data string) map[string]any {
	return map[string]any{"task_id": task["task_id"], "lease_token": task["lease_token"], "stream": "stdout", "data": data}
}

// A task's stored output stops at the server's cap, whatever the
// parallel appends: the crossing chunk is cut at a character boundary and
// one marker event (stream "ax") says so; later output stores nothing.
func TestTaskLogsCappedPerTask(t *testing.T) {
	t.Parallel()
	const maxBytes = 1000
	env := setupWithAgents(t, dispatch.AgentConfig{MaxTaskLogBytes: maxBytes})
	a := env.registerAgent("a", nil, 1)
	task := leasedTask(t, env, a)

	a.post("/logs", map[string]any{"chunks": []map[string]any{logChunk(task, strings.Repeat("a", 599))}}).must(t, http.StatusNoContent)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// 2-byte characters, so the cut may fall inside one.
			data := fmt.Sprintf("%d:", i) + strings.Repeat("é", 150)
			resp := a.post("/logs", map[string]any{"chunks": []map[string]any{logChunk(task, data), logChunk(task, "x")}})
			if resp.status != http.StatusNoContent {
				t.Errorf("append: %d %s", resp.status, resp.raw)
			}
		}()
	}
	wg.Wait()
	a.post("/logs", map[string]any{"chunks": []map[string]any{logChunk(task, "after the cap")}}).must(t, http.StatusNoContent)

	var stored int
	var chunks, markers int
	rows, err := env.pool.Query(context.Background(),
		"SELECT stream, message FROM ax.task_event WHERE task_id = $1 AND kind = 'log' ORDER BY id", task["task_id"])
	require.NoError(t, err)
	lastWasMarker := false
	for rows.Next() {
		var stream, msg string
		require.NoError(t, rows.Scan(&stream, &msg))
		require.True(t, utf8.ValidString(msg))
		require.False(t, lastWasMarker, "nothing is stored after the marker")
		if stream == "ax" {
			markers++
			lastWasMarker = true
			require.Contains(t, msg, "truncated")
			continue
		}
		chunks++
		stored += len(msg)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, 1, markers, "one truncation marker")
	require.LessOrEqual(t, stored, maxBytes)
	require.GreaterOrEqual(t, stored, maxBytes-1, "output is stored up to the cap (a 2-byte character may not fit)")
	require.Greater(t, chunks, 1)

	// The API shows the marker like any output.
	page := env.call("GET", fmt.Sprintf("/v1/executions/%s/logs?kind=log", task["execution_id"]), env.admin, nil).must(t, http.StatusOK)
	events := page["events"].([]any)
	require.Equal(t, "ax", events[len(events)-1].(map[string]any)["stream"])
}

// A page of logs stops once its messages pass 4 MiB: more says so and
// next_after continues where it stopped, until every event was read once.
func TestExecutionLogPagesCappedByBytes(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{MaxTaskLogBytes: 64 << 20})
	a := env.registerAgent("a", nil, 1)
	task := leasedTask(t, env, a)
	const chunk = 900 << 10
	for i := range 6 {
		a.post("/logs", map[string]any{"chunks": []map[string]any{
			logChunk(task, strings.Repeat(string(rune('a'+i)), chunk))}}).must(t, http.StatusNoContent)
	}

	var seen []string
	after := 0.0
	pages := 0
	for {
		resp := env.call("GET", fmt.Sprintf("/v1/executions/%s/logs?kind=log&limit=10000&after=%d", task["execution_id"], int64(after)), env.admin, nil)
		body := resp.must(t, http.StatusOK)
		pages++
		require.LessOrEqual(t, len(resp.raw), 4<<20+64<<10, "a page's body stays near its 4 MiB bound")
		bytes := 0
		for _, e := range body["events"].([]any) {
			msg := e.(map[string]any)["message"].(string)
			bytes += len(msg)
			seen = append(seen, msg[:1])
		}
		require.LessOrEqual(t, bytes, 4<<20)
		after = body["next_after"].(float64)
		if !body["more"].(bool) {
			break
		}
		require.Less(t, pages, 10)
	}
	require.Equal(t, []string{"a", "b", "c", "d", "e", "f"}, seen, "every chunk once, in order")
	require.Equal(t, 2, pages)

	// An event as big as the bound still comes, alone.
	big := a.post("/logs", map[string]any{"chunks": []map[string]any{logChunk(task, strings.Repeat("𝄞", 1<<20))}})
	big.must(t, http.StatusNoContent)
	a.post("/logs", map[string]any{"chunks": []map[string]any{logChunk(task, "tail")}}).must(t, http.StatusNoContent)
	body := env.call("GET", fmt.Sprintf("/v1/executions/%s/logs?kind=log&after=%d", task["execution_id"], int64(after)), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, 1, len(body["events"].([]any)), "the big event alone")
	require.Equal(t, true, body["more"])
	after = body["next_after"].(float64)
	body = env.call("GET", fmt.Sprintf("/v1/executions/%s/logs?kind=log&after=%d", task["execution_id"], int64(after)), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, 1, len(body["events"].([]any)), "then the tail")
	require.Equal(t, false, body["more"])
}
