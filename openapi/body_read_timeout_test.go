package openapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/stretchr/testify/require"
)

// Every operation that takes a body of megabytes gives it 30 s to arrive,
// huma's own default being 5 s: under a loaded CI machine a 4 MiB log post
// got 408 from that default, and a remote agent's link may be slower
// still.
func TestLargeBodiesGetThirtySecondsToArrive(t *testing.T) {
	t.Parallel()
	_, api := New(Config{})
	var large []string
	for path, item := range api.OpenAPI().Paths {
		for method, op := range map[string]*huma.Operation{http.MethodPost: item.Post, http.MethodPut: item.Put,
			http.MethodPatch: item.Patch} {
			if op == nil || op.RequestBody == nil || op.MaxBodyBytes <= 1<<20 {
				continue
			}
			require.GreaterOrEqual(t, op.BodyReadTimeout, 30*time.Second, "%s %s", method, path)
			large = append(large, method+" "+path)
		}
	}
	require.Contains(t, large, "POST /v1/agents/{id}/logs")
	require.Contains(t, large, "POST /v1/agents/{id}/complete")
	require.Contains(t, large, "POST /v1/runs/batch")
	require.Contains(t, large, "POST /v1/declarations")
}
