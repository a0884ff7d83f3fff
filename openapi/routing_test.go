package openapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// setupRouted is an API whose manual runs are routed, with a short steal
// delay and probe interval.
func setupRouted(t *testing.T) *apiEnv {
	t.Helper()
	return setupRoutedSteal(t, 500*time.Millisecond)
}

// setupRoutedSteal is setupRouted with a given steal delay.
func setupRoutedSteal(t *testing.T, steal time.Duration) *apiEnv {
	t.Helper()
	return setupRoutedAgents(t, dispatch.AgentConfig{StealAfter: steal, ProbeEvery: time.Second})
}

// setupRoutedAgents is setupRouted with a given agent config.
func setupRoutedAgents(t *testing.T, agentCfg dispatch.AgentConfig) *apiEnv {
	t.Helper()
	var router *dispatch.TaskRouter
	env := setupConfig(t, func(c *openapiConfig) {
		var err error
		// The tests' agents heartbeat once, when they register: a loaded
		// machine took longer than the default live window (two heartbeat
		// intervals, 10 s) from there to a run's routing, which then found
		// no agent (CI: TestConsistentHashKeepsAKeyOnOneAgent).
		router, err = dispatch.NewTaskRouter(agentCfg, dispatch.TaskRouterConfig{Refresh: time.Millisecond, Live: time.Hour}, nil, nil)
		require.NoError(t, err)
		c.Services.Agent, c.Services.Router = agentCfg, router
	})
	return env
}

func (e *apiEnv) manualJob(name string, mutate func(map[string]any)) string {
	e.t.Helper()
	job := map[string]any{"name": name, "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}}
	if mutate != nil {
		mutate(job)
	}
	return e.call("POST", "/v1/jobs", e.admin, job).must(e.t, http.StatusCreated)["id"].(string)
}

func (e *apiEnv) run(jobID string, params map[string]any) string {
	e.t.Helper()
	var body any
	if params != nil {
		body = map[string]any{"params": params}
	}
	return e.call("POST", "/v1/jobs/"+jobID+"/trigger", e.admin, body).must(e.t, http.StatusAccepted)["id"].(string)
}

// TestConsistentHashKeepsAKeyOnOneAgent: every run of a key is routed to
// the same agent; the others get nothing until the steal delay passes,
// and then the key's runner-up takes over before anyone else.
func TestConsistentHashKeepsAKeyOnOneAgent(t *testing.T) {
	t.Parallel()
	// A steal delay long enough that a loaded machine never reaches it by
	// accident (5 s did, with the suite's packages running side by side);
	// the test moves time past it by backdating the tasks.
	const steal = 60 * time.Second
	env := setupRoutedSteal(t, steal)
	agents := map[string]*agentClient{}
	for _, name := range []string{"a", "b", "c"} {
		a := env.registerAgent(name, nil, 100)
		agents[a.id] = a
	}
	jobID := env.manualJob("sticky", func(j map[string]any) {
		j["route"] = map[string]any{"strategy": "consistent_hash", "key": "customer_id={{.params.customer_id}}"}
	})
	for range 10 {
		env.run(jobID, map[string]any{"customer_id": 9527})
	}
	var owner, fallback string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		`SELECT DISTINCT preferred_agent_id::text, fallback_agent_id::text FROM ax.all_tasks`).Scan(&owner, &fallback))
	require.NotEqual(t, owner, fallback)
	var keys []string
	require.NoError(t, pgxCollect(env, `SELECT DISTINCT route_key FROM ax.all_tasks`, &keys))
	require.Equal(t, []string{"customer_id=9527"}, keys)

	for id, a := range agents {
		if id != owner {
			require.Empty(t, a.lease(10, 0), "before the steal delay only the owner may take its key")
		}
	}
	require.Len(t, agents[owner].lease(5, 0), 5)

	// Past the steal delay, well before 3×: as if the owner sat on them.
	_, err := env.pool.Exec(context.Background(),
		`UPDATE ax.task SET not_before = not_before - make_interval(secs => $1) WHERE state = 'pending'`,
		(steal + 5*time.Second).Seconds())
	require.NoError(t, err)
	for id, a := range agents {
		if id != owner && id != fallback {
			require.Empty(t, a.lease(10, 0), "the runner-up takes over first")
		}
	}
	taken := agents[fallback].lease(10, 0)
	require.Len(t, taken, 5)
	events := env.call("GET", "/v1/executions/"+taken[0]["execution_id"].(string)+"/logs?kind=state", env.admin, nil).
		must(t, http.StatusOK)["events"].([]any)
	require.Contains(t, events[0].(map[string]any)["message"], "taken over from agent "+owner)
}

// TestBroadcastRunsOnEveryLiveAgent: one pinned task per live, ready
// agent; each agent gets only its own; no agent at all fails the run.
func TestBroadcastRunsOnEveryLiveAgent(t *testing.T) {
	t.Parallel()
	env := setupRouted(t)
	jobID := env.manualJob("everywhere", func(j map[string]any) {
		j["route"] = map[string]any{"strategy": "broadcast"}
		j["target"] = map[string]any{"labels": map[string]string{"pool": "edge"}}
	})
	none := env.run(jobID, nil)
	got := env.call("GET", "/v1/executions/"+none, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "failed", got["state"])

	var clients []*agentClient
	for _, name := range []string{"e1", "e2", "e3"} {
		clients = append(clients, env.registerAgent(name, map[string]string{"pool": "edge"}, 4))
	}
	other := env.registerAgent("core", map[string]string{"pool": "core"}, 4)
	execID := env.run(jobID, nil)
	got = env.call("GET", "/v1/executions/"+execID, env.admin, nil).must(t, http.StatusOK)
	require.Len(t, got["tasks"], 3)

	require.Empty(t, other.lease(10, 0))
	// Pinned tasks are never stolen, whatever the wait: an hour, past the
	// steal delay and the starvation age.
	_, err := env.pool.Exec(context.Background(), `UPDATE ax.task SET not_before = not_before - interval '1 hour'
		WHERE execution_id = $1`, execID)
	require.NoError(t, err)
	require.Empty(t, other.lease(10, 0))
	seen := map[float64]bool{}
	for _, a := range clients {
		tasks := a.lease(10, 0)
		require.Len(t, tasks, 1, "each agent gets exactly its own task")
		require.EqualValues(t, 3, tasks[0]["shard_total"])
		seen[tasks[0]["shard_index"].(float64)] = true
		a.complete(tasks[0], "succeeded").must(t, http.StatusOK)
	}
	require.Len(t, seen, 3)
	got = env.call("GET", "/v1/executions/"+execID, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "succeeded", got["state"])
}

// TestShardsWithoutParamsGetRanges: shards without a param list split the
// job's range (or the 32-bit hash space) evenly.
func TestShardsWithoutParamsGetRanges(t *testing.T) {
	t.Parallel()
	env := setupRouted(t)
	hashSpace := env.manualJob("hash-space", func(j map[string]any) { j["shards"] = map[string]any{"count": 4} })
	ranged := env.manualJob("ranged", func(j map[string]any) {
		j["shards"] = map[string]any{"count": 3, "range": map[string]any{"from": 1, "to": 11}}
	})
	params := func(execID string) []string {
		var out []string
		for _, task := range env.call("GET", "/v1/executions/"+execID, env.admin, nil).must(t, http.StatusOK)["tasks"].([]any) {
			out = append(out, task.(map[string]any)["shard_param"].(string))
		}
		return out
	}
	require.Equal(t, []string{"0-1073741824", "1073741824-2147483648", "2147483648-3221225472", "3221225472-4294967296"},
		params(env.run(hashSpace, nil)))
	require.Equal(t, []string{"1-4", "4-7", "7-11"}, params(env.run(ranged, nil)))

	bad := env.call("POST", "/v1/jobs", env.admin, map[string]any{"name": "bad",
		"trigger": map[string]any{"kind": "manual"}, "executor": map[string]any{"kind": "shell", "command": "true"},
		"shards": map[string]any{"count": 2, "range": map[string]any{"from": 5, "to": 5}}})
	require.Equal(t, http.StatusUnprocessableEntity, bad.status)
	require.Contains(t, bad.errorLocations(), "body.shards.range.to")
}

// TestNotReadyAgentGetsNothing: an agent that has not reported ready
// leases nothing, even with work waiting.
func TestNotReadyAgentGetsNothing(t *testing.T) {
	t.Parallel()
	env := setupRouted(t)
	jobID := env.manualJob("work", nil)
	env.run(jobID, nil)
	a := env.registerAgent("half-started", nil, 4)
	a.post("/heartbeat", map[string]any{"tasks": []any{}, "running": 0, "ready": false}).must(t, http.StatusOK)
	require.Empty(t, a.lease(10, 1))
	a.heartbeat(nil).must(t, http.StatusOK) // ready now
	require.Len(t, a.lease(10, 1), 1)
}

// TestFailingAgentIsQuarantinedThenRestored: an agent failing most of its
// tasks is quarantined (no routed work, one probe at a time) and restored
// after its probes succeed.
func TestFailingAgentIsQuarantinedThenRestored(t *testing.T) {
	t.Parallel()
	// A probe interval no loaded machine reaches between two calls (1 s
	// did); the test moves time past it by backdating the last probe.
	const probeEvery = time.Minute
	env := setupRoutedAgents(t, dispatch.AgentConfig{StealAfter: 500 * time.Millisecond, ProbeEvery: probeEvery})
	ctx := context.Background()
	// Health judged at each sweep; the agent, which sends no heartbeat
	// here, is not marked offline however slow the machine makes the test.
	reaper := dispatch.NewReaper(env.pool, dispatch.AgentConfig{}, dispatch.ReaperConfig{HealthEvery: time.Nanosecond,
		OfflineAfter: time.Hour, Quarantine: axtype.QuarantinePolicy{Window: time.Minute, MinResults: 5, FailureRate: 0.5}})
	probeIntervalPasses := func(agentID string) {
		_, err := env.pool.Exec(ctx, `UPDATE ax.agent SET last_probe_at = last_probe_at - make_interval(secs => $1)
			WHERE id = $2`, (probeEvery + time.Second).Seconds(), agentID)
		require.NoError(t, err)
	}
	bad := env.registerAgent("bad", nil, 10)
	// One attempt: every outcome is final, so each run is one result.
	jobID := env.manualJob("work", func(j map[string]any) { j["retry"] = map[string]any{"max_attempts": 1} })
	for i := range 10 {
		env.run(jobID, nil)
		tasks := bad.lease(1, 0)
		require.Len(t, tasks, 1)
		state := "failed"
		if i%5 == 0 {
			state = "succeeded" // 80% fail
		}
		bad.complete(tasks[0], state).must(t, http.StatusOK)
	}
	require.NoError(t, reaper.Sweep(ctx))
	require.Equal(t, "quarantined", env.agentState(bad.id))

	for range 3 {
		env.run(jobID, nil)
	}
	require.Empty(t, bad.lease(10, 0), "no work right after quarantine")
	probeIntervalPasses(bad.id)
	probe := bad.lease(10, 0)
	require.Len(t, probe, 1, "a quarantined agent gets one probe task")
	require.Empty(t, bad.lease(10, 0), "and no second one before the probe interval")
	bad.complete(probe[0], "succeeded").must(t, http.StatusOK)
	probeIntervalPasses(bad.id)
	probe = bad.lease(10, 1)
	require.Len(t, probe, 1)
	bad.complete(probe[0], "succeeded").must(t, http.StatusOK)
	require.NoError(t, reaper.Sweep(ctx))
	require.Equal(t, "active", env.agentState(bad.id), "two good probes in a row restore it")
	require.NoError(t, reaper.Sweep(ctx))
	require.Equal(t, "active", env.agentState(bad.id), "its old failures no longer count")

	info := env.agentInfo(bad.id)
	recent := info["recent"].(map[string]any)
	require.EqualValues(t, 4, recent["succeeded"])
	require.EqualValues(t, 8, recent["failed"])
	require.EqualValues(t, 12, recent["served"])
}

// agentInfo returns the agent of id, in any state, as GET /v1/agents
// shows it.
func (e *apiEnv) agentInfo(id string) map[string]any {
	e.t.Helper()
	for _, a := range e.call("GET", "/v1/agents?id="+id, e.admin, nil).must(e.t, http.StatusOK)["agents"].([]any) {
		if a.(map[string]any)["id"] == id {
			return a.(map[string]any)
		}
	}
	e.t.Fatalf("agent %s not listed", id)
	return nil
}

func (e *apiEnv) agentState(id string) string { return e.agentInfo(id)["state"].(string) }

func pgxCollect(e *apiEnv, sql string, out *[]string) error {
	rows, err := e.pool.Query(context.Background(), sql)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return err
		}
		*out = append(*out, s)
	}
	return rows.Err()
}

// An agent's record counts its newest 1,000 state events in the window at
// most, so listing agents costs the same however busy they were: 1,200
// successes after 300 failures read as 1,000 successes and no failure.
func TestAgentRecordCountsTheNewestEvents(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	a := env.registerAgent("busy", nil, 1)
	_, err := env.pool.Exec(context.Background(), `
		INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, agent_id, message, at)
		SELECT ax.uuid_v7(), ax.uuid_v7(), 0, 1, 'state',
		       CASE WHEN i <= 300 THEN 'failed' ELSE 'succeeded' END::ax.task_state, $1, '',
		       now() - interval '1 minute' + i * interval '10 milliseconds'
		FROM generate_series(1, 1500) i`, a.id)
	require.NoError(t, err)
	recent := env.agentInfo(a.id)["recent"].(map[string]any)
	require.EqualValues(t, 1000, recent["succeeded"])
	require.EqualValues(t, 0, recent["failed"])
}

// TestShardRangeGivenIsChecked: a range that is given must not be empty,
// {0, 0} included (the engine's job cannot tell it from no range), and a
// generator takes none, the default range included; each is named once.
func TestShardRangeGivenIsChecked(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for _, c := range []struct {
		shards map[string]any
		at     string
	}{
		{map[string]any{"count": 2, "range": map[string]any{"from": 0, "to": 0}}, "body.shards.range.to"},
		{map[string]any{"count": 2, "range": map[string]any{"from": 7, "to": 3}}, "body.shards.range.to"},
		{map[string]any{"count": 2, "range": map[string]any{"from": 0, "to": 4294967296},
			"generator": map[string]any{"kind": "mod"}}, "body.shards.range"},
	} {
		bad := env.call("POST", "/v1/jobs", env.admin, map[string]any{"name": "ranged", "trigger": map[string]any{"kind": "manual"},
			"executor": map[string]any{"kind": "shell", "command": "true"}, "shards": c.shards})
		require.Equal(t, http.StatusUnprocessableEntity, bad.status)
		locations := bad.errorLocations()
		require.Contains(t, locations, c.at)
		n := 0
		for _, l := range locations {
			if l == c.at {
				n++
			}
		}
		require.Equal(t, 1, n, "named once: %v", locations)
	}
}
