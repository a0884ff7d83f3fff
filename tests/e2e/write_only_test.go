package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestWriteOnlySecretsSurviveTheRoundTrip: an HTTP job's header value and
// URL query are shown by ax job get -o yaml as ax-redacted; ax apply of
// that output leaves the job unchanged, and the request ax serve then
// sends carries the stored Authorization header and query value.
func TestWriteOnlySecretsSurviveTheRoundTrip(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	type seen struct{ auth, sig string }
	got := make(chan seen, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{auth: r.Header.Get("Authorization"), sig: r.URL.Query().Get("sig")}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(recv.Close)

	decl := map[string]any{"managed_by": "file:secret.yaml", "jobs": []any{map[string]any{
		"name": "secret", "trigger": map[string]any{"kind": "manual"}, "retry": map[string]any{"max_attempts": 1},
		"executor": map[string]any{"kind": "http", "url": recv.URL + "/run?sig=s3cret-sig",
			"headers": map[string]string{"Authorization": "Bearer s3cret-header"}}}}}
	status, report := s.API(t, "POST", "/v1/declarations", decl)
	require.Equal(t, http.StatusOK, status, report)
	id := report["jobs"].([]any)[0].(map[string]any)["id"].(string)

	out, err := s.AX(t, "job", "get", id, "-o", "yaml")
	require.NoError(t, err, out)
	require.NotContains(t, out, "s3cret")
	require.Contains(t, out, "Authorization: ax-redacted")
	require.Contains(t, out, "sig=ax-redacted")
	applied, err := axStdin(t, s, out, "apply", "-f", "-")
	require.NoError(t, err, applied)
	require.Contains(t, applied, "1 unchanged")

	exec := s.Trigger(t, id)
	require.Equal(t, "succeeded", s.WaitExecution(t, exec, 60e9))
	require.Equal(t, seen{auth: "Bearer s3cret-header", sig: "s3cret-sig"}, <-got)
}
