package openapi_test

import (
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// /docs is the API reference rendered by ax itself: every operation and
// schema is on the page, and it loads nothing from elsewhere (it works
// offline; its CSP forbids scripts and other origins).
func TestDocsPageIsSelfContained(t *testing.T) {
	t.Parallel()
	env := setup(t)
	resp, err := http.Get(env.url + "/docs")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'none'")
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	page := string(raw)
	for _, want := range []string{`id="op-trigger-job"`, "/v1/jobs/{id}/trigger", `id="op-submit-run-batch"`,
		`id="schema-Job"`, `id="schema-Execution"`, "Webhooks (sent by ax)", "delay_seconds"} {
		require.Contains(t, page, want)
	}
	require.NotContains(t, page, "<script")
	require.Empty(t, regexp.MustCompile(`(?i)(src|href)="(https?:)?//`).FindAllString(page, -1), "nothing from another origin")
}
