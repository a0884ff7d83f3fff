package openapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
)

// TestTraceParentFollowsTheRun: a run submitted with a traceparent keeps
// it and its tasks carry it to the agent; without one (or with an invalid
// one) the run gets a trace whose id is the execution id.
func TestTraceParentFollowsTheRun(t *testing.T) {
	t.Parallel()
	env := setupRouted(t)
	jobID := env.manualJob("traced", nil)
	a := env.registerAgent("a", nil, 10)

	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, err := http.NewRequest("POST", env.url+"/v1/jobs/"+jobID+"/trigger", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+env.admin)
	req.Header.Set("traceparent", tp)
	traced := env.do(req).must(t, http.StatusAccepted)
	require.Equal(t, tp, traced["traceparent"])
	tasks := a.lease(1, 0)
	require.Len(t, tasks, 1)
	require.Equal(t, tp, tasks[0]["traceparent"], "agents get the caller's trace")

	req, err = http.NewRequest("POST", env.url+"/v1/jobs/"+jobID+"/trigger", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+env.admin)
	req.Header.Set("traceparent", "00-00000000000000000000000000000000-00f067aa0ba902b7-01") // invalid: zero trace id
	fresh := env.do(req).must(t, http.StatusAccepted)
	own := fresh["traceparent"].(string)
	require.True(t, openapi.ValidTraceParent(own), own)
	require.Equal(t, strings.ReplaceAll(fresh["id"].(string), "-", ""), own[3:35], "the trace id is the execution id")
}

func TestValidTraceParent(t *testing.T) {
	t.Parallel()
	for tp, ok := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": true,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00": true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01": false, // unknown version
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01": false, // upper case
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01": false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7":    false,
		"": false,
	} {
		require.Equal(t, ok, openapi.ValidTraceParent(tp), tp)
	}
}
