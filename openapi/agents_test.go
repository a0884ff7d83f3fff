package openapi_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/agent"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// agentClient speaks the agent protocol over HTTP like ax-agent does.
type agentClient struct {
	env   *apiEnv
	id    string
	token string
}

func (e *apiEnv) registerAgent(name string, labels map[string]string, capacity int) *agentClient {
	e.t.Helper()
	creds := e.call("POST", "/v1/agents/register", e.key("agent"), map[string]any{
		"name": name, "labels": labels, "capacity": capacity, "version": "test",
		"executors": []string{"shell", "http", "handler"}, // the tests' jobs are mostly shell
	}).must(e.t, http.StatusCreated)
	a := &agentClient{env: e, id: creds["agent_id"].(string), token: creds["token"].(string)}
	a.heartbeat(nil).must(e.t, http.StatusOK) // ready
	return a
}

func (a *agentClient) post(path string, body any) *response {
	return a.env.call("POST", "/v1/agents/"+a.id+path, a.token, body)
}

func (a *agentClient) lease(max, wait int) []map[string]any {
	a.env.t.Helper()
	body := a.post("/lease", map[string]any{"max": max, "wait_seconds": wait}).must(a.env.t, http.StatusOK)
	var out []map[string]any
	for _, t := range body["tasks"].([]any) {
		out = append(out, t.(map[string]any))
	}
	return out
}

func (a *agentClient) heartbeat(tasks []map[string]any) *response {
	refs := []map[string]any{}
	for _, t := range tasks {
		refs = append(refs, map[string]any{"task_id": t["task_id"], "lease_token": t["lease_token"]})
	}
	return a.post("/heartbeat", map[string]any{"tasks": refs, "running": len(tasks), "ready": true})
}

func (a *agentClient) complete(t map[string]any, state string) *response {
	return a.post("/complete", map[string]any{"results": []map[string]any{{
		"task_id": t["task_id"], "lease_token": t["lease_token"], "state": state,
		"result": map[string]any{"shard": t["shard_index"]},
	}}})
}

func TestAgentProtocolHappyPath(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	job := cronJob("sharded", "0 0 * * *", "UTC")
	job["shards"] = map[string]any{"count": 3, "params": []string{"a", "b", "c"}}
	job["target"] = map[string]any{"labels": map[string]string{"pool": "billing"}}
	jobID := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)

	other := env.registerAgent("elsewhere", map[string]string{"pool": "web"}, 4)
	agent := env.registerAgent("biller", map[string]string{"pool": "billing", "region": "eu"}, 4)

	// A long poll waits, and wakes when the run is triggered.
	got := make(chan []map[string]any, 1)
	go func() { got <- agent.lease(10, 10) }()
	time.Sleep(200 * time.Millisecond)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	var tasks []map[string]any
	select {
	case tasks = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the long poll did not wake")
	}
	require.Len(t, tasks, 3)
	require.Empty(t, other.lease(10, 0), "labels do not match")
	for _, task := range tasks {
		require.Equal(t, exec["id"], task["execution_id"])
		require.Equal(t, "shell", task["executor"].(map[string]any)["kind"])
	}

	hb := agent.heartbeat(tasks).must(t, http.StatusOK)
	require.Len(t, hb["renewed"], 3)
	require.Empty(t, hb["lost"])
	running := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "running", running["state"])

	agent.post("/logs", map[string]any{"chunks": []map[string]any{{
		"task_id": tasks[0]["task_id"], "lease_token": tasks[0]["lease_token"], "stream": "stdout", "data": "hello\n"}}}).
		must(t, http.StatusNoContent)
	for _, task := range tasks {
		reply := agent.complete(task, "succeeded").must(t, http.StatusOK)
		require.Equal(t, "accepted", reply["results"].([]any)[0].(map[string]any)["status"])
	}
	// A result is recorded once: the same report again is a conflict.
	agent.complete(tasks[0], "failed").must(t, http.StatusConflict)

	done := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "succeeded", done["state"])
	for _, task := range done["tasks"].([]any) {
		task := task.(map[string]any)
		require.Equal(t, "succeeded", task["state"])
		// What ran where, and when: heartbeated, so started too.
		require.Equal(t, agent.id, task["agent_id"])
		require.NotEmpty(t, task["leased_at"])
		require.NotEmpty(t, task["started_at"])
	}
	logs := env.call("GET", "/v1/executions/"+exec["id"].(string)+"/logs?kind=log", env.admin, nil).must(t, http.StatusOK)
	require.Len(t, logs["events"], 1)
	require.Equal(t, "hello\n", logs["events"].([]any)[0].(map[string]any)["message"])
	states := env.call("GET", "/v1/executions/"+exec["id"].(string)+"/logs?kind=state", env.admin, nil).must(t, http.StatusOK)
	require.Len(t, states["events"], 6, "leased and succeeded for each shard")

	agents := env.call("GET", "/v1/agents", env.admin, nil).must(t, http.StatusOK)["agents"].([]any)
	require.Len(t, agents, 2)

	// One agent cannot act for another.
	env.call("POST", "/v1/agents/"+agent.id+"/lease", other.token, map[string]any{"max": 1}).must(t, http.StatusForbidden)
}

func TestAgentLeaseExpiryFencesTheOldToken(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{Lease: time.Second})
	job := cronJob("retried", "0 0 * * *", "UTC")
	job["retry"] = map[string]any{"max_attempts": 3, "backoff_seconds": 1}
	jobID := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("a", nil, 1)
	b := env.registerAgent("b", nil, 1)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)

	first := a.lease(1, 5)
	require.Len(t, first, 1)
	// a's lease runs out (moved back) though a itself was heard from just
	// now: the reaper gives the task back as a failed attempt (a lease
	// lost with a silent agent would keep the attempt: recovery_test.go).
	// The sweep runs as of a's last heartbeat and judges silence over a
	// minute, so a slow machine cannot make a silent before it: the
	// clock runs on from where it is set, and a sweep that started more
	// than the 1 s lease after it found a silent, lost the lease with it
	// and kept the attempt (b leased attempt 1, twice in CI). The lease
	// is moved back an hour, so it has run out as of that heartbeat
	// however long the machine took between it and the lease.
	var heard time.Time
	require.NoError(t, env.pool.QueryRow(context.Background(), `
		UPDATE ax.task SET lease_expires_at = lease_expires_at - interval '1 hour' WHERE id = $1
		RETURNING (SELECT last_heartbeat_at FROM ax.agent WHERE id = $2)`, first[0]["task_id"], a.id).Scan(&heard))
	c := clock.New()
	c.Set(heard)
	reaper := dispatch.NewReaper(env.pool, dispatch.AgentConfig{Lease: time.Minute},
		dispatch.ReaperConfig{Clock: c, OfflineAfter: time.Hour})
	require.NoError(t, reaper.Sweep(context.Background()))

	second := b.lease(1, 5) // after the 1 s backoff
	require.Len(t, second, 1)
	require.Equal(t, first[0]["task_id"], second[0]["task_id"])
	require.Equal(t, float64(2), second[0]["attempt"])
	require.NotEqual(t, first[0]["lease_token"], second[0]["lease_token"])

	// a wakes up: its heartbeat learns the lease is gone, its late result is refused.
	hb := a.heartbeat(first).must(t, http.StatusOK)
	require.Equal(t, []any{first[0]["task_id"]}, hb["lost"])
	a.complete(first[0], "succeeded").must(t, http.StatusConflict)

	b.complete(second[0], "succeeded").must(t, http.StatusOK)
	var results int
	require.NoError(t, env.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ax.all_task_events WHERE execution_id = $1 AND state = 'succeeded'`, exec["id"]).Scan(&results))
	require.Equal(t, 1, results, "the execution records exactly one result")
	final := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "succeeded", final["state"])
	// The task shows the attempt that succeeded: b's lease. b reported no
	// heartbeat before its result, so the task has no started_at; its
	// lease is its start.
	task := final["tasks"].([]any)[0].(map[string]any)
	require.Equal(t, b.id, task["agent_id"])
	require.NotEmpty(t, task["leased_at"])
	require.NotContains(t, task, "started_at")
}

func TestAgentFailureRetriesThenFails(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	job := cronJob("flaky", "0 0 * * *", "UTC")
	job["retry"] = map[string]any{"max_attempts": 2, "backoff_seconds": 1}
	jobID := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("a", nil, 1)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)

	for attempt := 1; attempt <= 2; attempt++ {
		tasks := a.lease(1, 5)
		require.Len(t, tasks, 1, "attempt %d", attempt)
		require.Equal(t, float64(attempt), tasks[0]["attempt"])
		a.complete(tasks[0], "failed").must(t, http.StatusOK)
	}
	final := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "failed", final["state"])
	require.Empty(t, a.lease(1, 0))
}

func TestAgentReleaseAndDrain(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	jobID := env.call("POST", "/v1/jobs", env.admin, cronJob("released", "0 0 * * *", "UTC")).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("a", nil, 1)
	b := env.registerAgent("b", nil, 1)
	env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	tasks := a.lease(1, 5)
	require.Len(t, tasks, 1)

	env.call("POST", "/v1/agents/"+a.id+"/drain", b.token, nil).must(t, http.StatusForbidden)
	env.call("POST", "/v1/agents/"+a.id+"/drain", a.token, nil).must(t, http.StatusNoContent)
	env.call("POST", "/v1/agents/"+a.id+"/drain", env.admin, nil).must(t, http.StatusNoContent)
	require.Empty(t, a.lease(1, 0), "a draining agent gets nothing new")
	a.post("/release", map[string]any{"tasks": []map[string]any{{
		"task_id": tasks[0]["task_id"], "lease_token": tasks[0]["lease_token"]}}}).must(t, http.StatusNoContent)
	again := b.lease(1, 5)
	require.Len(t, again, 1, "released at once")
	require.Equal(t, float64(1), again[0]["attempt"], "a release does not use up an attempt")
	a.post("/deregister", nil).must(t, http.StatusNoContent)
}

func setupWithAgents(t *testing.T, cfg dispatch.AgentConfig) *apiEnv {
	t.Helper()
	return setupConfig(t, func(c *openapiConfig) { c.Services.Agent = cfg })
}

func TestReaperTimesOutTasksAndMarksSilentAgentsOffline(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	job := cronJob("slow", "0 0 * * *", "UTC")
	job["timeout_seconds"] = 1
	job["retry"] = map[string]any{"max_attempts": 1} // the timeout is final
	jobID := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)["id"].(string)
	a := env.registerAgent("a", nil, 1)
	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	tasks := a.lease(1, 5)
	require.Len(t, tasks, 1)
	a.heartbeat(tasks).must(t, http.StatusOK) // running, lease fresh

	// The reaper judges by a clock the test moves past the 1 s timeout
	// (without the agents' timeout grace: the agent is silent from here on,
	// and goes offline after 1 s).
	c := clock.New()
	reaper := dispatch.NewReaper(env.pool, dispatch.AgentConfig{}, dispatch.ReaperConfig{OfflineAfter: time.Second, Clock: c,
		TimeoutGrace: -1})
	c.Advance(1200 * time.Millisecond)
	require.NoError(t, reaper.Sweep(context.Background()))

	final := env.call("GET", "/v1/executions/"+exec["id"].(string), env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "timed_out", final["state"])
	require.Contains(t, final["tasks"].([]any)[0].(map[string]any)["error"], "timed out after 1 s")
	// Silent for 1.2 s, the agent went offline in the same sweep, and its
	// token with it: it learns by a 401 and registers again.
	a.heartbeat(tasks).must(t, http.StatusUnauthorized)

	c.Advance(1100 * time.Millisecond)
	require.NoError(t, reaper.Sweep(context.Background()))
	require.Equal(t, "offline", env.agentInfo(a.id)["state"])
	// Its token went with it: the agent must register again.
	a.heartbeat(nil).must(t, http.StatusUnauthorized)
	a.post("/lease", map[string]any{"max": 1}).must(t, http.StatusUnauthorized)
	require.Equal(t, "offline", env.agentInfo(a.id)["state"], "a heartbeat of the old token brings it not back")
	env.registerAgent("a", nil, 1)
}

// TestDeregisterRevokesTheAgentToken: after deregistering (by the agent
// or an admin), the agent's token is refused on every agent call, the
// agent stays offline, and the key that registered it still registers.
func TestDeregisterRevokesTheAgentToken(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	jobID := env.call("POST", "/v1/jobs", env.admin, cronJob("gone", "0 0 * * *", "UTC")).must(t, http.StatusCreated)["id"].(string)
	for _, by := range []string{"itself", "admin"} {
		a := env.registerAgent("dereg-"+by, nil, 1)
		key := a.token
		if by == "admin" {
			key = env.admin
		}
		env.call("POST", "/v1/agents/"+a.id+"/deregister", key, nil).must(t, http.StatusNoContent)
		a.heartbeat(nil).must(t, http.StatusUnauthorized)
		a.post("/lease", map[string]any{"max": 1}).must(t, http.StatusUnauthorized)
		a.post("/complete", map[string]any{"results": []map[string]any{{"task_id": jobID, "lease_token": jobID,
			"state": "succeeded"}}}).must(t, http.StatusUnauthorized)
		require.Equal(t, "offline", env.agentInfo(a.id)["state"], by)
	}
	env.trigger(jobID, "", "").must(t, http.StatusAccepted)
	require.Len(t, env.registerAgent("again", nil, 1).lease(1, 5), 1, "a new registration works")
}

// TestLeaseMaxIsWhatAgentsAsk: the server takes lease calls of up to
// agent.MaxLeasePerCall tasks, the most ax-agent asks for in one call.
func TestLeaseMaxIsWhatAgentsAsk(t *testing.T) {
	t.Parallel()
	env := setup(t)
	a := env.registerAgent("big", nil, 5000)
	a.post("/lease", map[string]any{"max": agent.MaxLeasePerCall, "wait_seconds": 0}).must(t, http.StatusOK)
	a.post("/lease", map[string]any{"max": agent.MaxLeasePerCall + 1, "wait_seconds": 0}).must(t, http.StatusUnprocessableEntity)
}

// TestAgentLabelsAreBounded: an agent's labels are read on each of its
// leases and heartbeats and by every router about once a second; a
// registration may carry at most 100, keys of 1-100 bytes and values of at
// most 255. A refused registration makes no agent.
func TestAgentLabelsAreBounded(t *testing.T) {
	t.Parallel()
	env := setup(t)
	register := func(labels map[string]string) *response {
		return env.call("POST", "/v1/agents/register", env.key("agent"), map[string]any{"name": "labels", "labels": labels, "capacity": 1})
	}
	many := map[string]string{}
	for i := range 101 {
		many[fmt.Sprintf("k%d", i)] = "v"
	}
	for name, labels := range map[string]map[string]string{
		"101 labels":   many,
		"a long key":   {strings.Repeat("k", 101): "v"},
		"an empty key": {"": "v"},
		"a long value": {"pool": strings.Repeat("v", 256)},
		"200,000 labels": func() map[string]string {
			m := map[string]string{}
			for i := range 200_000 {
				m[fmt.Sprintf("key-%d", i)] = "value"
			}
			return m
		}(),
	} {
		body := register(labels).must(t, http.StatusUnprocessableEntity)
		require.Contains(t, fmt.Sprint(body["errors"]), "body.labels", name)
	}
	body := env.call("GET", "/v1/agents", env.key("read"), nil).must(t, http.StatusOK)
	require.Empty(t, body["agents"], "no agent was registered")

	most := map[string]string{strings.Repeat("k", 100): strings.Repeat("v", 255)}
	for i := range 99 {
		most[fmt.Sprintf("k%d", i)] = "v"
	}
	register(most).must(t, http.StatusCreated)
}

// agentNames returns the names of a page of GET /v1/agents (query after
// the ?) and its next_cursor.
func (e *apiEnv) agentNames(query string) (names []string, next string) {
	e.t.Helper()
	body := e.call("GET", "/v1/agents?"+query, e.admin, nil).must(e.t, http.StatusOK)
	for _, a := range body["agents"].([]any) {
		a := a.(map[string]any)
		names = append(names, a["name"].(string)+":"+a["state"].(string))
	}
	next, _ = body["next_cursor"].(string)
	return names, next
}

// TestAgentListPages: GET /v1/agents pages as the other lists do (limit,
// cursor, next_cursor; 422 for a cursor it did not give), by name, and
// lists the agents not offline unless asked for a state; by id, agents in
// any state. Before, it answered every agent ever registered, offline
// ones included, in one body.
func TestAgentListPages(t *testing.T) {
	t.Parallel()
	env := setup(t)
	byName := map[string]*agentClient{}
	for _, name := range []string{"d", "b", "a", "c", "e"} {
		byName[name] = env.registerAgent(name, nil, 1)
	}
	// Two registrations of b and d ended (restarted pods) and one of e
	// drains.
	env.call("POST", "/v1/agents/"+byName["b"].id+"/deregister", env.admin, nil).must(t, http.StatusNoContent)
	env.call("POST", "/v1/agents/"+byName["d"].id+"/deregister", env.admin, nil).must(t, http.StatusNoContent)
	env.call("POST", "/v1/agents/"+byName["e"].id+"/drain", env.admin, nil).must(t, http.StatusNoContent)
	byName["b2"] = env.registerAgent("b", nil, 1)

	page, next := env.agentNames("")
	require.Equal(t, []string{"a:active", "b:active", "c:active", "e:draining"}, page, "not offline, by name")
	require.Empty(t, next)

	var all []string
	cursor := ""
	for range 10 {
		page, next := env.agentNames("limit=1&cursor=" + cursor)
		require.LessOrEqual(t, len(page), 1)
		all = append(all, page...)
		if next == "" {
			break
		}
		cursor = next
	}
	require.Equal(t, []string{"a:active", "b:active", "c:active", "e:draining"}, all, "one at a time, each once")

	page, next = env.agentNames("state=offline&limit=1")
	require.Equal(t, []string{"b:offline"}, page)
	require.NotEmpty(t, next)
	page, next = env.agentNames("state=offline&limit=1&cursor=" + next)
	require.Equal(t, []string{"d:offline"}, page)
	require.Empty(t, next, "the last page")
	page, _ = env.agentNames("state=draining")
	require.Equal(t, []string{"e:draining"}, page)

	// By id: in any state, unless one is asked for.
	ids := "id=" + byName["d"].id + "&id=" + byName["a"].id + "&id=" + byName["b2"].id
	page, _ = env.agentNames(ids)
	require.Equal(t, []string{"a:active", "b:active", "d:offline"}, page)
	page, _ = env.agentNames(ids + "&state=offline")
	require.Equal(t, []string{"d:offline"}, page)

	// A cursor this API did not give, and one of its form that names no
	// agent.
	nobody := uuid.MustParse("00000000-0000-7000-8000-000000000000")
	for _, bad := range []string{"%21%21", base64.RawURLEncoding.EncodeToString(nobody[:])} {
		problem := env.call("GET", "/v1/agents?cursor="+bad, env.admin, nil)
		require.Equal(t, "invalid cursor", problem.must(t, http.StatusUnprocessableEntity)["detail"], bad)
		require.Equal(t, []string{"query.cursor"}, problem.errorLocations(), bad)
	}
	env.call("GET", "/v1/agents?limit=1001", env.admin, nil).must(t, http.StatusUnprocessableEntity)
	env.call("GET", "/v1/agents?state=gone", env.admin, nil).must(t, http.StatusUnprocessableEntity)
	env.call("GET", "/v1/agents?id=nope", env.admin, nil).must(t, http.StatusUnprocessableEntity)
	many := strings.Repeat("&id="+byName["a"].id, 101)
	env.call("GET", "/v1/agents?"+many[1:], env.admin, nil).must(t, http.StatusUnprocessableEntity)
}
