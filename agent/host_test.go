package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// An agent tells the server where it runs (recorded on task events) and
// how much disk it has left (on every heartbeat).
func TestAgentReportsHostAndDiskFree(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	dir := t.TempDir()
	a := newTestAgent(t, d, Config{DiskPath: dir, HostIP: "10.1.2.3"})
	start(t, a)
	var free *int64
	eventually(t, func() bool {
		d.snapshot(func(d *serverDouble) {
			if n := len(d.heartbeats); n > 0 {
				free = d.heartbeats[n-1].DiskFreeBytes
			}
		})
		return free != nil
	}, "a heartbeat with the free disk")
	want, ok := diskFree(dir)
	require.True(t, ok)
	require.Positive(t, *free)
	require.InDelta(t, want, *free, 1<<30, "the free space of the file system holding DiskPath")
	d.snapshot(func(d *serverDouble) {
		require.Len(t, d.registrations, 1)
		require.Equal(t, localHostName(), d.registrations[0].HostName)
		require.Equal(t, "10.1.2.3", d.registrations[0].HostIP)
	})
	_, ok = diskFree(dir + "/missing")
	require.False(t, ok, "a path that does not exist: unknown, left out of the heartbeat")
}

func TestSanitizeHostName(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"worker-17.example.com", "worker-17.example.com"},
		{"my host", "myhost"},
		{"héte\x00;rm", "hterm"},
		{strings.Repeat("a", 300), strings.Repeat("a", 255)},
		{"", ""},
	} {
		require.Equal(t, tt.want, sanitizeHostName(tt.in), "%q", tt.in)
	}
}

// localIP is the local end of the route to the server: loopback for a
// server on loopback, nothing without a server URL.
func TestLocalIP(t *testing.T) {
	t.Parallel()
	require.Equal(t, "127.0.0.1", localIP(t.Context(), "http://127.0.0.1:8080"))
	require.Equal(t, "127.0.0.1", localIP(t.Context(), "https://127.0.0.1"), "default port")
	require.Empty(t, localIP(t.Context(), ""))
	require.Empty(t, localIP(t.Context(), "::not a url"))
}
