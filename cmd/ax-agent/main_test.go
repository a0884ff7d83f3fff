package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/agent"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestParseConfigDefaults(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(nil, envOf(map[string]string{"AX_API_KEY": "api-key"}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, agent.Config{URL: "http://127.0.0.1:8080", Key: "api-key", Labels: map[string]string{},
		Capacity: 4, DrainGrace: 90 * time.Second, SelfCheckRetry: 10 * time.Second,
		Executors: []string{"handler", "http"}}, cfg)
}

func TestParseConfigFromEnvironment(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig(nil, envOf(map[string]string{
		"AX_SERVER": "https://ax.internal", "AX_AGENT_KEY": "agent-key", "AX_API_KEY": "api-key",
		"AX_AGENT_NAME": "worker-7", "AX_AGENT_LABELS": "pool=billing, zone = eu-1 ,", "AX_AGENT_CAPACITY": "16",
		"AX_DRAIN_GRACE": "2m", "AX_HEARTBEAT_INTERVAL": "3s", "AX_AGENT_WEIGHT": "3", "AX_READY_RETRY": "2s",
		"AX_EXECUTORS": "shell, handler",
	}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, agent.Config{URL: "https://ax.internal", Key: "agent-key", Name: "worker-7",
		Labels: map[string]string{"pool": "billing", "zone": "eu-1"}, Capacity: 16, Weight: 3, DrainGrace: 2 * time.Minute,
		HeartbeatInterval: 3 * time.Second, SelfCheckRetry: 2 * time.Second, Executors: []string{"shell", "handler"}}, cfg)
}

func TestParseConfigReadyCommand(t *testing.T) {
	t.Parallel()
	flag := filepath.Join(t.TempDir(), "ready")
	cfg, err := parseConfig(nil, envOf(map[string]string{"AX_API_KEY": "k", "AX_READY_COMMAND": "test -e " + flag}), io.Discard)
	require.NoError(t, err)
	require.NotNil(t, cfg.SelfCheck)
	require.ErrorContains(t, cfg.SelfCheck(context.Background()), "test -e "+flag)
	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	require.NoError(t, cfg.SelfCheck(context.Background()))

	cfg, err = parseConfig([]string{"-ready-command", "exit 7", "-weight", "5"},
		envOf(map[string]string{"AX_API_KEY": "k", "AX_READY_COMMAND": "true", "AX_AGENT_WEIGHT": "2"}), io.Discard)
	require.NoError(t, err)
	require.ErrorContains(t, cfg.SelfCheck(context.Background()), "exit status 7", "the flag wins")
	require.Equal(t, 5, cfg.Weight)
}

func TestParseConfigFlagsWin(t *testing.T) {
	t.Parallel()
	cfg, err := parseConfig([]string{"-key", "flag-key", "-capacity", "2", "-labels", "a=b", "-drain-grace", "5s"},
		envOf(map[string]string{"AX_AGENT_KEY": "env-key", "AX_AGENT_CAPACITY": "9", "AX_AGENT_LABELS": "x=y"}), io.Discard)
	require.NoError(t, err)
	require.Equal(t, "flag-key", cfg.Key)
	require.Equal(t, 2, cfg.Capacity)
	require.Equal(t, map[string]string{"a": "b"}, cfg.Labels)
	require.Equal(t, 5*time.Second, cfg.DrainGrace)
}

func TestParseConfigErrors(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args []string
		env  map[string]string
		want string
	}{
		"capacity":  {env: map[string]string{"AX_AGENT_CAPACITY": "many"}, want: `AX_AGENT_CAPACITY="many" is not a number`},
		"weight":    {env: map[string]string{"AX_AGENT_WEIGHT": "heavy"}, want: `AX_AGENT_WEIGHT="heavy" is not a number`},
		"retry":     {env: map[string]string{"AX_READY_RETRY": "10"}, want: `AX_READY_RETRY="10" is not a duration`},
		"grace":     {env: map[string]string{"AX_DRAIN_GRACE": "90"}, want: `AX_DRAIN_GRACE="90" is not a duration`},
		"label":     {env: map[string]string{"AX_AGENT_LABELS": "pool"}, want: `label "pool" is not k=v`},
		"argument":  {args: []string{"serve"}, want: `unexpected argument "serve"`},
		"bad flag":  {args: []string{"-nope"}, want: "flag provided but not defined"},
		"empty key": {env: map[string]string{"AX_AGENT_LABELS": "=v"}, want: `label "=v" is not k=v`},
	} {
		_, err := parseConfig(tc.args, envOf(tc.env), io.Discard)
		require.ErrorContains(t, err, tc.want, name)
	}
}
