package main

import (
	"flag"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/stretchr/testify/require"
)

func TestValidateAgentTiming(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lease, heartbeat time.Duration
		err              string
	}{
		{lease: 30 * time.Second, heartbeat: 5 * time.Second},
		{lease: 3 * time.Second, heartbeat: time.Second},
		{lease: 2 * time.Second, heartbeat: time.Second},
		{lease: 1500 * time.Millisecond, heartbeat: time.Second, err: "lease 1.5s is not a whole number of seconds"},
		{lease: 30 * time.Second, heartbeat: 0, err: "heartbeat interval 0s is not a whole number of seconds of at least 1 s"},
		{lease: 5 * time.Second, heartbeat: 3 * time.Second, err: "heartbeat interval 3s is more than half the lease 5s"},
	} {
		err := validateAgentTiming(dispatch.AgentConfig{Lease: tc.lease, HeartbeatInterval: tc.heartbeat})
		if tc.err == "" {
			require.NoError(t, err, "lease %s, heartbeat %s", tc.lease, tc.heartbeat)
			continue
		}
		require.ErrorContains(t, err, tc.err)
	}
}

func TestEnvDuration(t *testing.T) {
	t.Setenv("AX_TEST_DURATION", "")
	d, err := envDuration("AX_TEST_DURATION", 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, d, "unset: the default")

	t.Setenv("AX_TEST_DURATION", " 3s ")
	d, err = envDuration("AX_TEST_DURATION", 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, 3*time.Second, d)

	t.Setenv("AX_TEST_DURATION", "3")
	_, err = envDuration("AX_TEST_DURATION", 30*time.Second)
	require.EqualError(t, err, `AX_TEST_DURATION="3" is not a duration such as 30s`)
}

func TestPoolFlags(t *testing.T) {
	t.Setenv("AX_DB_MAX_CONNS", "12")
	t.Setenv("AX_DB_MIN_CONNS", "2")
	t.Setenv("AX_DB_REQUEST_CONNS", "3")
	parse := func(args ...string) serveConfig {
		var cfg serveConfig
		fs := flag.NewFlagSet("ax serve", flag.ContinueOnError)
		require.NoError(t, addPoolFlags(fs, &cfg))
		require.NoError(t, fs.Parse(args))
		return cfg
	}
	cfg := parse()
	require.Equal(t, 12, cfg.PoolMaxConns, "from the environment")
	require.Equal(t, 2, cfg.PoolMinConns)
	require.Equal(t, 3, cfg.PoolRequestConns)
	cfg = parse("--db-max-conns", "20", "--db-min-conns", "0", "--db-request-conns", "4")
	require.Equal(t, 20, cfg.PoolMaxConns, "the flag wins")
	require.Equal(t, 0, cfg.PoolMinConns)
	require.Equal(t, 4, cfg.PoolRequestConns)

	t.Setenv("AX_DB_MAX_CONNS", "many")
	require.EqualError(t, addPoolFlags(flag.NewFlagSet("ax serve", flag.ContinueOnError), &serveConfig{}),
		`AX_DB_MAX_CONNS="many" is not a whole number of 0 or more`)

	for _, tc := range []struct {
		max, min, request int
		err               string
	}{
		{max: 0, min: 0},
		{max: 10, min: 10},
		{max: 0, min: 3}, // checked against the URL's or pgx's max when the pool opens
		{max: 1001, err: "db max conns 1001 is not between 1 and 1000 (0: the default)"},
		{max: 4, min: 5, err: "db min conns 5 is more than db max conns 4"},
		{max: 0, min: 1001, err: "db min conns 1001 is not between 0 and 1000"},
		{request: 1001, err: "db request conns 1001 is not between 1 and 1000 (0: the default)"},
	} {
		err := validatePool(serveConfig{PoolMaxConns: tc.max, PoolMinConns: tc.min, PoolRequestConns: tc.request})
		if tc.err == "" {
			require.NoError(t, err, "max %d min %d", tc.max, tc.min)
			continue
		}
		require.EqualError(t, err, tc.err)
	}
}

// The callback retry schedule is a list of positive durations, bounded.
func TestDurationListFlag(t *testing.T) {
	var l durationList
	require.NoError(t, l.Set("100ms, 2s,1m"))
	require.Equal(t, durationList{100 * time.Millisecond, 2 * time.Second, time.Minute}, l)
	require.Equal(t, "100ms,2s,1m0s", l.String())
	for _, bad := range []string{"", "1s,,2s", "-1s", "0s", "soon", strings.Repeat("1s,", 20) + "1s"} {
		require.Error(t, l.Set(bad), bad)
	}
}

// A misfire threshold out of range stops ax serve before it connects.
func TestMisfireThresholdBounded(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://127.0.0.1:1/unused")
	for _, arg := range []string{"500ms", "2h0m0s"} {
		err := run(t.Context(), []string{"serve", "--misfire-threshold", arg})
		require.ErrorContains(t, err, "misfire threshold "+arg+" must be from 1s to 1h")
	}
	t.Setenv("AX_MISFIRE_THRESHOLD", "0s")
	require.ErrorContains(t, run(t.Context(), []string{"serve"}), "misfire threshold 0s must be from 1s to 1h")
}

// The body memory budget comes from AX_BODY_MEMORY_BUDGET or
// --body-memory-budget (the flag wins), defaults to 64 MiB, and is at
// least the largest body, or -1 for none.
func TestBodyMemoryBudgetFlag(t *testing.T) {
	parse := func(args ...string) serveConfig {
		var cfg serveConfig
		fs := flag.NewFlagSet("ax serve", flag.ContinueOnError)
		require.NoError(t, addTransportFlags(fs, &cfg))
		require.NoError(t, fs.Parse(args))
		return cfg
	}
	require.Equal(t, int64(64<<20), parse().BodyMemoryBudget)
	t.Setenv("AX_BODY_MEMORY_BUDGET", "16777216")
	require.Equal(t, int64(16<<20), parse().BodyMemoryBudget, "from the environment")
	require.Equal(t, int64(-1), parse("--body-memory-budget", "-1").BodyMemoryBudget, "the flag wins")
	for budget, ok := range map[int64]bool{-1: true, 8 << 20: true, 1 << 30: true, 0: false, 1 << 20: false, -2: false} {
		err := validateTransport(serveConfig{ReadTimeout: time.Second, BodyMemoryBudget: budget})
		if ok {
			require.NoError(t, err, budget)
		} else {
			require.ErrorContains(t, err, "body memory budget", budget)
		}
	}
}

// --trusted-proxies and AX_TRUSTED_PROXIES take CIDRs or addresses; the
// flag wins over the variable, and a bad entry stops ax serve.
func TestTrustedProxiesFlag(t *testing.T) {
	t.Setenv("AX_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7")
	var c serveConfig
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	require.NoError(t, addTransportFlags(fs, &c))
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32")}, c.TrustedProxies)
	require.NoError(t, fs.Parse([]string{"--trusted-proxies", "::1,172.16.1.9/12"}))
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("172.16.0.0/12")}, c.TrustedProxies)
	require.Error(t, fs.Parse([]string{"--trusted-proxies", "proxy.internal"}))
	t.Setenv("AX_TRUSTED_PROXIES", "10.0.0.0/33")
	require.Error(t, addTransportFlags(flag.NewFlagSet("t", flag.ContinueOnError), &c))
}
