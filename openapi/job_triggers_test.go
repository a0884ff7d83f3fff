package openapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// weekdaysAndWeekends is the guide's example: weekdays at 09:00 in Berlin,
// weekends at 12:00 in New York.
func weekdaysAndWeekends() []any {
	return []any{
		map[string]any{"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"},
		map[string]any{"kind": "cron", "cron": "0 12 * * 6,0", "timezone": "America/New_York"},
	}
}

func (e *apiEnv) mergePatch(t *testing.T, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("PATCH", e.url+path, stringsReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	req.Header.Set("Authorization", "Bearer "+e.admin)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var out map[string]any
	require.NoError(t, json.Unmarshal(raw, &out), string(raw))
	return resp.StatusCode, out
}

// TestJobTriggersRoundTrip: a job with triggers is shown with them (and
// no trigger), PUT back as shown keeps them, a PATCH that swaps them for
// one trigger works, and a list of one is stored as trigger.
func TestJobTriggersRoundTrip(t *testing.T) {
	t.Parallel()
	env := setup(t)
	created := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "two-clocks", "triggers": weekdaysAndWeekends(),
		"executor": map[string]any{"kind": "shell", "command": "true"},
	}).must(t, http.StatusCreated)
	require.NotContains(t, created, "trigger")
	require.Len(t, created["triggers"], 2)
	require.NotNil(t, created["next_fire_at"])
	next, err := time.Parse(time.RFC3339, created["next_fire_at"].(string))
	require.NoError(t, err)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	newYork, _ := time.LoadLocation("America/New_York")
	inBerlin, inNewYork := next.In(berlin), next.In(newYork)
	require.True(t, (inBerlin.Hour() == 9 && inBerlin.Weekday() >= time.Monday && inBerlin.Weekday() <= time.Friday) ||
		(inNewYork.Hour() == 12 && (inNewYork.Weekday() == time.Saturday || inNewYork.Weekday() == time.Sunday)), next)

	id := created["id"].(string)
	delete(created, "signing_secret")
	env.call("PUT", "/v1/jobs/"+id, env.admin, created).must(t, http.StatusOK)
	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, created["triggers"], got["triggers"])
	require.Equal(t, created["next_fire_at"], got["next_fire_at"], "the same schedule keeps its next fire")

	code, patched := env.mergePatch(t, "/v1/jobs/"+id, `{"triggers":null,"trigger":{"kind":"interval","interval_seconds":60}}`)
	require.Equal(t, http.StatusOK, code, patched)
	require.NotContains(t, patched, "triggers")
	require.Equal(t, "interval", patched["trigger"].(map[string]any)["kind"])

	code, patched = env.mergePatch(t, "/v1/jobs/"+id, `{"trigger":null,"triggers":[{"kind":"cron","cron":"0 9 * * 1-5","timezone":"Europe/Berlin"}]}`)
	require.Equal(t, http.StatusOK, code, patched)
	require.NotContains(t, patched, "triggers", "a list of one is the job's trigger")
	require.Equal(t, "0 9 * * 1-5", patched["trigger"].(map[string]any)["cron"])
}

// TestJobTriggersValidation: every refusal names the field, and a refused
// update changes nothing.
func TestJobTriggersValidation(t *testing.T) {
	t.Parallel()
	env := setup(t)
	shell := map[string]any{"kind": "shell", "command": "true"}
	cron := func(expr, tz string) map[string]any {
		return map[string]any{"kind": "cron", "cron": expr, "timezone": tz}
	}
	var many []any
	for i := range 17 {
		many = append(many, cron(fmt.Sprintf("%d * * * *", i), "UTC"))
	}
	cases := []struct {
		name  string
		job   map[string]any
		field string
	}{
		{"bad cron", map[string]any{"triggers": []any{cron("0 9 * * 1-5", "UTC"), cron("0 99 * * *", "UTC")}}, "body.triggers[1].cron"},
		{"bad timezone", map[string]any{"triggers": []any{cron("0 9 * * *", "Mars/Olympus"), cron("0 12 * * *", "UTC")}}, "body.triggers[0].timezone"},
		{"delay in a list", map[string]any{"triggers": []any{map[string]any{"kind": "delay", "run_at": time.Now().Add(time.Hour).Format(time.RFC3339)}, cron("0 12 * * *", "UTC")}}, "body.triggers[0].kind"},
		{"twice the same", map[string]any{"triggers": []any{cron("0 12 * * *", "UTC"), cron("0 12 * * *", "UTC")}}, "body.triggers[1]"},
		{"both", map[string]any{"trigger": cron("0 12 * * *", "UTC"), "triggers": []any{cron("0 9 * * *", "UTC"), cron("0 12 * * *", "UTC")}}, "body.triggers"},
		{"neither", map[string]any{}, "body.trigger"},
		{"empty list", map[string]any{"triggers": []any{}}, "body.triggers"},
		{"too many", map[string]any{"triggers": many}, "body.triggers"},
		{"interval missing", map[string]any{"triggers": []any{cron("0 12 * * *", "UTC"), map[string]any{"kind": "interval"}}}, "body.triggers[1].interval_seconds"},
		{"jitter over an interval", map[string]any{"jitter_seconds": 60, "triggers": []any{cron("0 12 * * *", "UTC"), map[string]any{"kind": "interval", "interval_seconds": 30}}}, "body.jitter_seconds"},
	}
	for _, c := range cases {
		c.job["name"], c.job["executor"] = "bad", shell
		resp := env.call("POST", "/v1/jobs", env.admin, c.job)
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s: %s", c.name, resp.raw)
		require.Contains(t, resp.errorLocations(), c.field, "%s: %s", c.name, resp.raw)
	}
	require.Zero(t, len(env.call("GET", "/v1/jobs", env.admin, nil).must(t, http.StatusOK)["jobs"].([]any)), "no bad job was stored")

	created := env.call("POST", "/v1/jobs", env.admin, map[string]any{"name": "good", "triggers": weekdaysAndWeekends(), "executor": shell}).must(t, http.StatusCreated)
	id := created["id"].(string)
	code, problem := env.mergePatch(t, "/v1/jobs/"+id, `{"trigger":{"kind":"manual"}}`)
	require.Equal(t, http.StatusUnprocessableEntity, code, problem)
	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, created["triggers"], got["triggers"], "a refused patch changes nothing")
}

// TestCronPreviewOfTriggers: the preview of a list merges the triggers'
// fires and names the triggers of each; a bad trigger is named.
func TestCronPreviewOfTriggers(t *testing.T) {
	t.Parallel()
	env := setup(t)
	got := env.call("POST", "/v1/cron/preview", env.admin, map[string]any{
		"triggers": weekdaysAndWeekends(), "count": 3, "after": "2027-01-01T00:00:00Z", // a Friday
	}).must(t, http.StatusOK)
	fires := got["fires"].([]any)
	require.Len(t, fires, 3)
	want := []struct {
		utc     string
		trigger float64
	}{{"2027-01-01T08:00:00Z", 0}, {"2027-01-02T17:00:00Z", 1}, {"2027-01-03T17:00:00Z", 1}}
	for i, w := range want {
		f := fires[i].(map[string]any)
		require.Equal(t, w.utc, f["utc"])
		require.Equal(t, []any{w.trigger}, f["triggers"])
	}
	require.Equal(t, "Europe/Berlin", got["timezone"])

	resp := env.call("POST", "/v1/cron/preview", env.admin, map[string]any{
		"triggers": []any{map[string]any{"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}, map[string]any{"kind": "cron", "cron": "nope"}},
	})
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, resp.raw)
	require.Contains(t, resp.errorLocations(), "body.triggers[1].cron")
}

// TestExplainListsTriggers: explain of a job with several triggers shows
// each trigger, whether it ticks at the instant, and its own next tick.
func TestExplainListsTriggers(t *testing.T) {
	t.Parallel()
	env := setup(t)
	created := env.call("POST", "/v1/jobs", env.admin, map[string]any{
		"name": "two-clocks", "triggers": weekdaysAndWeekends(),
		"executor": map[string]any{"kind": "shell", "command": "true"},
	}).must(t, http.StatusCreated)
	// A Friday in the future: 09:00 in Berlin is a tick of the first.
	got := env.explain(t, created["id"].(string), "2030-01-04T08:00:00Z")
	require.Equal(t, "upcoming", got["verdict"])
	require.Equal(t, true, got["tick"])
	triggers := got["triggers"].([]any)
	require.Len(t, triggers, 2)
	first, second := triggers[0].(map[string]any), triggers[1].(map[string]any)
	require.Equal(t, true, first["tick"])
	require.Equal(t, false, second["tick"])
	require.Equal(t, "2030-01-07T08:00:00Z", first["next_tick"], "the next weekday")
	require.Equal(t, "2030-01-05T17:00:00Z", second["next_tick"], "Saturday noon in New York")
	require.Equal(t, "2030-01-05T17:00:00Z", got["next_tick"])
}

// TestDeclaredJobWithTriggers: a declaration (what ax apply sends) may
// give triggers; declaring it again unchanged writes nothing, and a
// changed list updates the job.
func TestDeclaredJobWithTriggers(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := map[string]any{"name": "two-clocks", "group": "decl", "triggers": weekdaysAndWeekends(),
		"executor": map[string]any{"kind": "handler", "handler": "report"}}
	report := env.call("POST", "/v1/declarations", env.admin, declaration("file:jobs.yaml", "", true, job)).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"two-clocks": "created"}, actions(t, report))
	id := report["jobs"].([]any)[0].(map[string]any)["id"].(string)
	require.Len(t, env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)["triggers"], 2)

	report = env.call("POST", "/v1/declarations", env.admin, declaration("file:jobs.yaml", "", true, job)).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"two-clocks": "unchanged"}, actions(t, report))

	job["triggers"] = append(weekdaysAndWeekends(), map[string]any{"kind": "interval", "interval_seconds": 3600})
	report = env.call("POST", "/v1/declarations", env.admin, declaration("file:jobs.yaml", "", true, job)).must(t, http.StatusOK)
	require.Equal(t, map[string]string{"two-clocks": "updated"}, actions(t, report))
	require.Len(t, env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)["triggers"], 3)

	bad := map[string]any{"name": "bad", "group": "decl", "executor": job["executor"],
		"triggers": []any{map[string]any{"kind": "cron", "cron": "0 9 * * 1-5", "timezone": "Europe/Berlin"}, map[string]any{"kind": "manual"}}}
	resp := env.call("POST", "/v1/declarations", env.admin, declaration("file:jobs.yaml", "", true, job, bad))
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, resp.raw)
	require.Contains(t, resp.errorLocations(), "body.jobs[1].triggers[1].kind")
}
