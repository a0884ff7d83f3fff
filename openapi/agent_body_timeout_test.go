package openapi

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Every agent call that carries a body gives it 30 s to arrive, huma's
// own default being 5 s: under a loaded CI machine a 4 MiB log post got
// 408 from that default, and a remote agent's link may be slower still.
func TestAgentCallsGiveTheirBodiesThirtySeconds(t *testing.T) {
	t.Parallel()
	_, api := New(Config{})
	checked := 0
	for path, item := range api.OpenAPI().Paths {
		if !strings.HasPrefix(path, "/v1/agents/") || item.Post == nil || item.Post.RequestBody == nil {
			continue
		}
		require.Equal(t, 30*time.Second, item.Post.BodyReadTimeout, path)
		require.Equal(t, int64(8<<20), item.Post.MaxBodyBytes, path)
		checked++
	}
	require.GreaterOrEqual(t, checked, 6, "register, lease, heartbeat, complete, logs, release")
}
