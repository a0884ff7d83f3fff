package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue"
)

// TestJobPageShowsEveryTrigger: the job page of a job with several
// triggers names each and lists their merged next fires, each with the
// triggers that tick then.
func TestJobPageShowsEveryTrigger(t *testing.T) {
	t.Parallel()
	e := setup(t)
	status, out := e.api("POST", "/v1/jobs", map[string]any{"name": "two-clocks", "group": "billing",
		"triggers": []any{
			map[string]any{"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
			map[string]any{"kind": "cron", "cron": "0 12 * * 6,0", "timezone": "America/New_York"},
		},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	require.Equal(t, http.StatusCreated, status, out)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.key(queue.ScopeAdmin)).status)
	p := b.get("/ui/jobs/" + out["id"].(string))
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "[0] on weekdays at 09:00 Europe/Berlin; [1] on weekends at 12:00 America/New_York")
	require.Contains(t, p.body, "<th>Triggers</th>")
	// A week of fires holds ticks of both.
	require.True(t, strings.Contains(p.body, "<td>[0]</td>") && strings.Contains(p.body, "<td>[1]</td>"), p.body)
}
