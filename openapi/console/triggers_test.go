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
			// Every day: any 5 next fires (what the page lists) hold ticks of
			// both. On weekends only, from Sunday's tick to Monday's, the next
			// 5 were all weekdays' and the test failed every week.
			map[string]any{"kind": "cron", "cron": "0 12 * * *", "timezone": "America/New_York"},
		},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	require.Equal(t, http.StatusCreated, status, out)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.key(queue.ScopeAdmin)).status)
	p := b.get("/ui/jobs/" + out["id"].(string))
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, "[0] on weekdays at 09:00 Europe/Berlin; [1] every day at 12:00 America/New_York")
	require.Contains(t, p.body, "<th>Triggers</th>")
	// The next fires hold ticks of both.
	require.True(t, strings.Contains(p.body, "<td>[0]</td>") && strings.Contains(p.body, "<td>[1]</td>"), p.body)
}

// TestJobPageDrawsItsGraph: a job that runs after two others shows them
// left of it, each a link to its job with the end it waits for on the
// edge; the upstream's page shows it on the right; a job in no graph
// draws none.
func TestJobPageDrawsItsGraph(t *testing.T) {
	t.Parallel()
	e := setup(t)
	create := func(name string, trigger map[string]any) string {
		status, out := e.api("POST", "/v1/jobs", map[string]any{"name": name, "group": "etl", "trigger": trigger,
			"executor": map[string]any{"kind": "shell", "command": "true"}})
		require.Equal(t, http.StatusCreated, status, out)
		return out["id"].(string)
	}
	manual := map[string]any{"kind": "manual"}
	orders, refunds := create("orders", manual), create("refunds", manual)
	load := create("load", map[string]any{"kind": "after", "mode": "all", "upstream": []any{
		map[string]any{"job": "etl/orders", "on": "success"}, map[string]any{"job": "etl/refunds", "on": "completion"}}})
	alone := create("alone", manual)
	b := e.browser()
	require.Equal(t, http.StatusSeeOther, b.login(e.key(queue.ScopeAdmin)).status)

	p := b.get("/ui/jobs/" + load)
	require.Equal(t, http.StatusOK, p.status)
	require.Contains(t, p.body, `<svg id="job-graph"`)
	require.Contains(t, p.body, `data-role="job" data-job="etl/load (all)"`)
	require.Contains(t, p.body, `<a href="/ui/jobs/`+orders+`"><g class="graph-job" data-role="upstream" data-job="etl/orders">`)
	require.Contains(t, p.body, `<a href="/ui/jobs/`+refunds+`"><g class="graph-job" data-role="upstream" data-job="etl/refunds">`)
	require.Contains(t, p.body, `<g class="graph-edge" data-on="success">`)
	require.Contains(t, p.body, `<g class="graph-edge" data-on="completion">`)

	p = b.get("/ui/jobs/" + orders)
	require.Contains(t, p.body, `<a href="/ui/jobs/`+load+`"><g class="graph-job" data-role="downstream" data-job="etl/load">`)
	require.NotContains(t, b.get("/ui/jobs/"+alone).body, "job-graph")
}
