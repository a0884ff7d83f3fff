package main

import (
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
