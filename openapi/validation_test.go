package openapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestCronPreviewTable checks the dialect end to end: each valid
// expression with its next fire times, each invalid one with the field the
// problem names.
func TestCronPreviewTable(t *testing.T) {
	t.Parallel()
	env := setup(t)
	const after = "2026-11-30T03:00:00Z"
	cases := []struct {
		cron, tz  string
		next      []string // expected fires (UTC) strictly after `after`
		errField  string   // expected error location when invalid
		errSubstr string
	}{
		{cron: "0 0 8 * * ?", tz: "Asia/Shanghai", next: []string{"2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"}},
		{cron: "0 8 * * *", tz: "Asia/Shanghai", next: []string{"2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"}},
		{cron: "*/15 * * * *", tz: "UTC", next: []string{"2026-11-30T03:15:00Z", "2026-11-30T03:30:00Z"}},
		{cron: "*/10 * * * * *", tz: "UTC", next: []string{"2026-11-30T03:00:10Z", "2026-11-30T03:00:20Z"}},
		{cron: "30 5 * * * *", tz: "UTC", next: []string{"2026-11-30T03:05:30Z", "2026-11-30T04:05:30Z"}},
		{cron: "0 0 12 * * 1", tz: "UTC", next: []string{"2026-11-30T12:00:00Z", "2026-12-07T12:00:00Z"}}, // 1 = Monday
		{cron: "0 0 12 * * MON", tz: "UTC", next: []string{"2026-11-30T12:00:00Z", "2026-12-07T12:00:00Z"}},
		{cron: "0 12 * * 0", tz: "UTC", next: []string{"2026-12-06T12:00:00Z", "2026-12-13T12:00:00Z"}}, // 0 = Sunday
		{cron: "0 12 * * 7", tz: "UTC", next: []string{"2026-12-06T12:00:00Z", "2026-12-13T12:00:00Z"}}, // 7 = Sunday too
		{cron: "0 12 * * sun", tz: "UTC", next: []string{"2026-12-06T12:00:00Z", "2026-12-13T12:00:00Z"}},
		{cron: "0 9 * * MON-FRI", tz: "Europe/London", next: []string{"2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z"}},
		{cron: "@daily", tz: "UTC", next: []string{"2026-12-01T00:00:00Z", "2026-12-02T00:00:00Z"}},
		{cron: "@hourly", tz: "UTC", next: []string{"2026-11-30T04:00:00Z", "2026-11-30T05:00:00Z"}},
		{cron: "@weekly", tz: "UTC", next: []string{"2026-12-06T00:00:00Z", "2026-12-13T00:00:00Z"}},
		{cron: "@monthly", tz: "America/New_York", next: []string{"2026-12-01T05:00:00Z", "2027-01-01T05:00:00Z"}},
		{cron: "@yearly", tz: "UTC", next: []string{"2027-01-01T00:00:00Z", "2028-01-01T00:00:00Z"}},
		{cron: "0 0 L * ?", tz: "UTC", next: []string{"2026-11-30T00:00:00Z", "2026-12-31T00:00:00Z"}[1:]},
		{cron: "0 0 15W * ?", tz: "UTC", next: []string{"2026-12-15T00:00:00Z", "2027-01-15T00:00:00Z"}},
		{cron: "0 0 ? * 5L", tz: "UTC", next: []string{"2026-12-25T00:00:00Z", "2027-01-29T00:00:00Z"}},
		{cron: "0 0 ? * MON#2", tz: "UTC", next: []string{"2026-12-14T00:00:00Z", "2027-01-11T00:00:00Z"}},
		{cron: "0 0 29 2 *", tz: "UTC", next: []string{"2028-02-29T00:00:00Z", "2032-02-29T00:00:00Z"}},
		{cron: "0 0 1 JAN,JUL *", tz: "UTC", next: []string{"2027-01-01T00:00:00Z", "2027-07-01T00:00:00Z"}},
		{cron: "0 30 2 * * *", tz: "America/New_York", next: []string{"2026-11-30T07:30:00Z", "2026-12-01T07:30:00Z"}},
		{cron: "0 0 9 * * *", tz: "Australia/Sydney", next: []string{"2026-11-30T22:00:00Z", "2026-12-01T22:00:00Z"}}, // AEDT, UTC+11
		{cron: "0 0 9 * * *", tz: "Asia/Kolkata", next: []string{"2026-11-30T03:30:00Z", "2026-12-01T03:30:00Z"}},     // UTC+5:30
		{cron: "5-10/5 0 * * *", tz: "UTC", next: []string{"2026-12-01T00:05:00Z", "2026-12-01T00:10:00Z"}},

		{cron: "0 0 30 2 *", tz: "UTC", errField: "body.cron", errSubstr: "never"},
		{cron: "0 0 31 4 *", tz: "UTC", errField: "body.cron", errSubstr: "never"},
		{cron: "? ? ? ? ?", tz: "UTC", errField: "body.cron"},
		{cron: "0 0 * * * 2026", tz: "UTC", errField: "body.cron"}, // 6 fields are seconds-first: 2026 is no weekday
		{cron: "0 0 0 1 1 ? 2027", tz: "UTC", errField: "body.cron"},
		{cron: "60 * * * *", tz: "UTC", errField: "body.cron"},
		{cron: "* 24 * * *", tz: "UTC", errField: "body.cron"},
		{cron: "0 0 32 * *", tz: "UTC", errField: "body.cron"},
		{cron: "0 0 * 13 *", tz: "UTC", errField: "body.cron"},
		{cron: "0 0 * * 8", tz: "UTC", errField: "body.cron"},
		{cron: "0 0 * * FUNDAY", tz: "UTC", errField: "body.cron"},
		{cron: "* * * *", tz: "UTC", errField: "body.cron"},
		{cron: "hello world", tz: "UTC", errField: "body.cron"},
		{cron: "@every 5m", tz: "UTC", errField: "body.cron"},
		{cron: "0 10-5 * * *", tz: "UTC", errField: "body.cron"},
		{cron: "*/0 * * * *", tz: "UTC", errField: "body.cron"},
		{cron: "0 0 * * *", tz: "Mars/Olympus_Mons", errField: "body.timezone"},
		{cron: "0 0 * * *", tz: "Local", errField: "body.timezone"},
		{cron: "0 0 * * *", tz: "EST5EDT-nope", errField: "body.timezone"},
	}
	require.GreaterOrEqual(t, len(cases), 40)
	for _, tc := range cases {
		resp := env.call("POST", "/v1/cron/preview", env.admin, map[string]any{
			"cron": tc.cron, "timezone": tc.tz, "count": max(len(tc.next), 1), "after": after,
		})
		if tc.errField != "" {
			resp.must(t, http.StatusUnprocessableEntity)
			require.Equal(t, []string{tc.errField}, resp.errorLocations(), "%q in %s", tc.cron, tc.tz)
			if tc.errSubstr != "" {
				require.Contains(t, string(resp.raw), tc.errSubstr)
			}
			continue
		}
		body := resp.must(t, http.StatusOK)
		var got []string
		for _, n := range body["next"].([]any) {
			ts, err := time.Parse(time.RFC3339, n.(string))
			require.NoError(t, err)
			got = append(got, ts.UTC().Format(time.RFC3339))
		}
		require.Equal(t, tc.next, got, "%q in %s", tc.cron, tc.tz)
	}
}

// TestJobValidation sends bad job definitions: each gets a 422 naming the
// field, and none changes the database.
func TestJobValidation(t *testing.T) {
	t.Parallel()
	env := setup(t)
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	shell := map[string]any{"kind": "shell", "command": "true"}
	cron := map[string]any{"kind": "cron", "cron": "0 * * * *"}
	cases := []struct {
		name  string
		body  string
		field string
	}{
		{"missing name", `{"trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"x"}}`, "body.name"},
		{"blank name", jsonOf(map[string]any{"name": "   ", "trigger": cron, "executor": shell}), "body.name"},
		{"unknown field", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "colour": "red"}), "body.colour"},
		{"unknown nested field", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "cron", "cron": "0 * * * *", "tz": "UTC"}, "executor": shell}), "body.trigger.tz"},
		{"bad trigger kind", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "sometimes"}, "executor": shell}), "body.trigger.kind"},
		{"cron missing", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "cron"}, "executor": shell}), "body.trigger.cron"},
		{"cron never fires", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "cron", "cron": "0 0 30 2 *"}, "executor": shell}), "body.trigger.cron"},
		{"bad timezone", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "cron", "cron": "0 * * * *", "timezone": "Moon/Base"}, "executor": shell}), "body.trigger.timezone"},
		{"cron on interval", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "interval", "interval_seconds": 5, "cron": "* * * * *"}, "executor": shell}), "body.trigger.cron"},
		{"interval zero", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "interval"}, "executor": shell}), "body.trigger.interval_seconds"},
		{"interval negative", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "interval", "interval_seconds": -1}, "executor": shell}), "body.trigger.interval_seconds"},
		{"delay without run_at", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "delay"}, "executor": shell}), "body.trigger.run_at"},
		{"delay in the past", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "delay", "run_at": past}, "executor": shell}), "body.trigger.run_at"},
		{"shell without command", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "shell", "command": " "}}), "body.executor.command"},
		{"http without url", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "http"}}), "body.executor.url"},
		{"http relative url", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "http", "url": "/run"}}), "body.executor.url"},
		{"http ftp url", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "http", "url": "ftp://host/x"}}), "body.executor.url"},
		{"http bad method", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "http", "url": "http://h/x", "method": "BREW"}}), "body.executor.method"},
		{"handler without name", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "handler"}}), "body.executor.handler"},
		{"command on handler", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "handler", "handler": "h", "command": "ls"}}), "body.executor.command"},
		{"bad executor kind", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": map[string]any{"kind": "python"}}), "body.executor.kind"},
		{"bad route strategy", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "route": map[string]any{"strategy": "luck"}}), "body.route.strategy"},
		{"hash without key", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "route": map[string]any{"strategy": "consistent_hash"}}), "body.route.key"},
		{"shard count zero", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "shards": map[string]any{"count": -1}}), "body.shards.count"},
		{"shard count too big", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "shards": map[string]any{"count": 10001}}), "body.shards.count"},
		{"shard params mismatch", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "shards": map[string]any{"count": 3, "params": []string{"a"}}}), "body.shards.params"},
		{"timeout zero", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "timeout_seconds": -5}), "body.timeout_seconds"},
		{"retry attempts", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "retry": map[string]any{"max_attempts": 101}}), "body.retry.max_attempts"},
		{"retry backoff order", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "retry": map[string]any{"backoff_seconds": 60, "backoff_max_seconds": 10}}), "body.retry.backoff_max_seconds"},
		{"bad concurrency policy", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "concurrency_policy": "sometimes"}), "body.concurrency_policy"},
		{"bad misfire policy", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "misfire": map[string]any{"policy": "ignore"}}), "body.misfire.policy"},
		{"callback not http", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "callback": map[string]any{"url": "mailto:ops@example.com"}}), "body.callback.url"},
		{"priority range", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "priority": 5000}), "body.priority"},
		{"bad label key", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "target": map[string]any{"labels": map[string]string{"has space": "x"}}}), "body.target.labels"},
		{"rate class chars", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "rate_limit_class": "no spaces"}), "body.rate_limit_class"},
		{"name too long", jsonOf(map[string]any{"name": strings.Repeat("n", 201), "trigger": cron, "executor": shell}), "body.name"},
		{"active window reversed", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "active_from": "2027-01-02T00:00:00Z", "active_until": "2027-01-01T00:00:00Z"}), "body.active_until"},
		{"active window empty", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "active_from": "2027-01-01T00:00:00Z", "active_until": "2027-01-01T00:00:00Z"}), "body.active_until"},
		{"active_from not a time", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "active_from": "tomorrow"}), "body.active_from"},
		{"jitter too long", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "jitter_seconds": 86401}), "body.jitter_seconds"},
		{"jitter not below the interval", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "interval", "interval_seconds": 60}, "executor": shell, "jitter_seconds": 60}), "body.jitter_seconds"},
		{"jitter negative", jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "jitter_seconds": -1}), "body.jitter_seconds"},
		{"Quartz L-31", jsonOf(map[string]any{"name": "x", "trigger": map[string]any{"kind": "cron", "cron": "0 0 L-31 * *"}, "executor": shell}), "body.trigger.cron"},
	}
	for _, tc := range cases {
		resp := env.call("POST", "/v1/jobs", env.admin, tc.body)
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s: %s", tc.name, resp.raw)
		require.Contains(t, resp.errorLocations(), tc.field, "%s: %s", tc.name, resp.raw)
		require.Equal(t, "application/problem+json", resp.header.Get("Content-Type"), tc.name)
	}
	// Malformed JSON is a 400: nothing could be read to validate.
	resp := env.call("POST", "/v1/jobs", env.admin, `{"name": `)
	require.Equal(t, http.StatusBadRequest, resp.status, "%s", resp.raw)
	require.Contains(t, resp.errorLocations(), "body")
	require.Equal(t, 0, env.countJobs(), "bad input must not change state")

	// Oversized bodies are refused before they are read whole.
	big := jsonOf(map[string]any{"name": "x", "trigger": cron, "executor": shell, "description": strings.Repeat("d", 600<<10)})
	resp = env.call("POST", "/v1/jobs", env.admin, big)
	require.Equal(t, http.StatusRequestEntityTooLarge, resp.status, "%s", resp.raw)

	// A bad update leaves the stored job as it was.
	created := env.call("POST", "/v1/jobs", env.admin, map[string]any{"name": "ok", "trigger": cron, "executor": shell}).must(t, http.StatusCreated)
	id := created["id"].(string)
	created["trigger"] = map[string]any{"kind": "cron", "cron": "0 0 31 4 *"}
	env.call("PUT", "/v1/jobs/"+id, env.admin, created).must(t, http.StatusUnprocessableEntity)
	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "0 * * * *", got["trigger"].(map[string]any)["cron"])
	env.call("GET", "/v1/jobs/not-a-uuid", env.admin, nil).must(t, http.StatusUnprocessableEntity)
}
