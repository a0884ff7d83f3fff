package openapi_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// The schema check matches keys regardless of case but the decoder does
// not: a job whose executor key is miscased was validated as one job and
// stored as another (an empty executor kind, a 500). Found by
// FuzzJobDefinition.
func TestMiscasedRequiredKeysAreRefused(t *testing.T) {
	t.Parallel()
	env := setup(t)
	resp := env.call("POST", "/v1/jobs", env.admin,
		`{"name":"w","trigger":{"kind":"manual"},"eXeCutor":{"kind":"shell","command":"true"}}`)
	resp.must(t, http.StatusUnprocessableEntity)
	require.Contains(t, resp.errorLocations(), "body.executor.kind")
	resp = env.call("POST", "/v1/jobs", env.admin,
		`{"name":"w","Trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"}}`)
	resp.must(t, http.StatusUnprocessableEntity)
	// trigger is one of trigger and triggers: the decoder saw neither.
	require.Contains(t, resp.errorLocations(), "body.trigger")
	require.Zero(t, env.countJobs())
}
