package openapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/dispatch"
)

// An agent's host name and IP, as it registered, are on the state events
// of its leases and results (GET /v1/executions/{id}/logs) and on GET
// /v1/agents with the free disk and smoothed load of its heartbeats. An
// agent that names no IP gets the address its registration came from.
func TestAgentHostOnTaskEvents(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	jobID := env.call("POST", "/v1/jobs", env.admin, map[string]any{"name": "hosted", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}}).must(t, http.StatusCreated)["id"].(string)

	creds := env.call("POST", "/v1/agents/register", env.key("agent"), map[string]any{
		"name": "w17", "capacity": 2, "executors": []string{"shell"},
		"host_name": "worker-17.example.com", "host_ip": "10.0.3.17",
	}).must(t, http.StatusCreated)
	a := &agentClient{env: env, id: creds["agent_id"].(string), token: creds["token"].(string)}
	a.post("/heartbeat", map[string]any{"tasks": []any{}, "running": 0, "ready": true, "cpu": 0.5, "memory": 0.25,
		"disk_free_bytes": 123456789}).must(t, http.StatusOK)

	exec := env.trigger(jobID, "", "").must(t, http.StatusAccepted)["id"].(string)
	tasks := a.lease(1, 5)
	require.Len(t, tasks, 1)
	a.complete(tasks[0], "succeeded").must(t, http.StatusOK)

	events := env.call("GET", "/v1/executions/"+exec+"/logs?kind=state", env.admin, nil).must(t, http.StatusOK)["events"].([]any)
	hosts := map[string][2]any{}
	for _, raw := range events {
		e := raw.(map[string]any)
		hosts[e["state"].(string)] = [2]any{e["worker_host"], e["worker_ip"]}
	}
	want := [2]any{"worker-17.example.com", "10.0.3.17"}
	require.Equal(t, map[string][2]any{"leased": want, "succeeded": want}, hosts)

	// Without an IP: the address the registration came from (loopback here).
	env.call("POST", "/v1/agents/register", env.key("agent"), map[string]any{"name": "w18", "capacity": 1}).
		must(t, http.StatusCreated)
	agents := map[string]map[string]any{}
	for _, raw := range env.call("GET", "/v1/agents", env.admin, nil).must(t, http.StatusOK)["agents"].([]any) {
		agent := raw.(map[string]any)
		agents[agent["name"].(string)] = agent
	}
	require.Equal(t, "worker-17.example.com", agents["w17"]["host_name"])
	require.Equal(t, "10.0.3.17", agents["w17"]["host_ip"])
	require.Equal(t, float64(123456789), agents["w17"]["disk_free_bytes"])
	require.InDelta(t, 0.5, agents["w17"]["load"], 0.01, "the busiest of CPU 0.5, memory 0.25, running 0 (its first sample)")
	require.Equal(t, "127.0.0.1", agents["w18"]["host_ip"])
	require.Nil(t, agents["w18"]["host_name"])
	require.Nil(t, agents["w18"]["disk_free_bytes"], "never reported")
}

// Bad host names, IPs and free disk are refused with a problem naming the
// field.
func TestAgentHostValidated(t *testing.T) {
	t.Parallel()
	env := setupWithAgents(t, dispatch.AgentConfig{})
	for _, tt := range []struct {
		name  string
		field string
		value any
		at    string
	}{
		{name: "not an IP", field: "host_ip", value: "10.0.3.300", at: "body.host_ip"},
		{name: "IP with zone", field: "host_ip", value: "fe80::1%eth0", at: "body.host_ip"},
		{name: "host name with a space", field: "host_name", value: "worker 17", at: "body.host_name"},
		{name: "host name too long", field: "host_name", value: strings.Repeat("a", 256), at: "body.host_name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"name": "w", "capacity": 1, tt.field: tt.value}
			r := env.call("POST", "/v1/agents/register", env.key("agent"), body)
			require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
			require.Contains(t, r.errorLocations(), tt.at)
		})
	}
	a := env.registerAgent("w", nil, 1)
	r := a.post("/heartbeat", map[string]any{"tasks": []any{}, "running": 0, "disk_free_bytes": -1})
	require.Equal(t, http.StatusUnprocessableEntity, r.status, string(r.raw))
	require.Contains(t, r.errorLocations(), "body.disk_free_bytes")
}
