package main

import (
	"flag"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// The health settings map from AX_ variables, flags override them, and
// out-of-range values are refused before anything starts.
func TestHealthFlags(t *testing.T) {
	parse := func(args ...string) (serveConfig, error) {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var c serveConfig
		if err := addHealthFlags(fs, &c); err != nil {
			return c, err
		}
		if err := fs.Parse(args); err != nil {
			return c, err
		}
		return c, validateHealth(c)
	}
	for _, name := range []string{"AX_LOAD_SMOOTHING", "AX_DURATION_WINDOW", "AX_QUARANTINE_ERROR_SHARE", "AX_QUARANTINE_ERROR_CODES", "AX_HEALTH_CHECK_EVERY"} {
		t.Setenv(name, "")
	}
	c, err := parse()
	require.NoError(t, err)
	require.Equal(t, axtype.DefaultLoadSmoothing, c.Agent.LoadSmoothing)
	require.Equal(t, healthConfig{DurationWindow: time.Hour, CheckEvery: 5 * time.Second}, c.Health,
		"defaults: 1 h window, no error share, a check every 5 s")

	t.Setenv("AX_LOAD_SMOOTHING", "1m")
	t.Setenv("AX_DURATION_WINDOW", "10m")
	t.Setenv("AX_QUARANTINE_ERROR_SHARE", "0.3")
	t.Setenv("AX_QUARANTINE_ERROR_CODES", "enospc, signal_killed,,")
	t.Setenv("AX_HEALTH_CHECK_EVERY", "30s")
	c, err = parse()
	require.NoError(t, err)
	require.Equal(t, time.Minute, c.Agent.LoadSmoothing)
	require.Equal(t, healthConfig{DurationWindow: 10 * time.Minute, ErrorShare: 0.3,
		ErrorCodes: []string{"enospc", "signal_killed"}, CheckEvery: 30 * time.Second}, c.Health)

	c, err = parse("--quarantine-error-codes", "exit_137", "--quarantine-error-share", "0.5")
	require.NoError(t, err)
	require.Equal(t, []string{"exit_137"}, c.Health.ErrorCodes, "the flag replaces the variable")
	require.InDelta(t, 0.5, c.Health.ErrorShare, 0)

	for _, tt := range []struct {
		args []string
		err  string
	}{
		{args: []string{"--quarantine-error-share", "1.5"}, err: "quarantine error share 1.5 must be between 0 (off) and 1"},
		{args: []string{"--quarantine-error-share", "NaN"}, err: "quarantine error share NaN"},
		{args: []string{"--duration-window", "0s"}, err: "duration window 0s must be at least 1 s"},
		{args: []string{"--load-smoothing", "10ms"}, err: "load smoothing 10ms must be at least 1 s"},
		{args: []string{"--health-check-every", "100ms"}, err: "health check every 100ms must be from 1 s to 1 h"},
		{args: []string{"--quarantine-error-codes", "ENOSPC"}, err: `quarantine error code "ENOSPC" is not an error code`},
	} {
		_, err := parse(tt.args...)
		require.ErrorContains(t, err, tt.err, "%v", tt.args)
	}
	t.Setenv("AX_QUARANTINE_ERROR_SHARE", "a lot")
	_, err = parse()
	require.EqualError(t, err, `AX_QUARANTINE_ERROR_SHARE="a lot" is not a number`)
}
