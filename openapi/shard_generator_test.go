package openapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// shardParams returns the shard_param of each task of an execution, read
// over the API, in shard order.
func (e *apiEnv) shardParams(execID string) []string {
	e.t.Helper()
	body := e.call("GET", "/v1/executions/"+execID, e.admin, nil).must(e.t, http.StatusOK)
	tasks := body["tasks"].([]any)
	out := make([]string, len(tasks))
	for i, raw := range tasks {
		task := raw.(map[string]any)
		require.Equal(e.t, float64(i), task["shard_index"])
		out[i] = task["shard_param"].(string)
	}
	return out
}

// previewShards asks for the shard params of a fire of job at at (nil:
// its next fire) and returns the scheduled time and the params.
func (e *apiEnv) previewShards(jobID string, at *time.Time) (time.Time, []string) {
	e.t.Helper()
	var body any
	if at != nil {
		body = map[string]any{"at": at.Format(time.RFC3339Nano)}
	}
	got := e.call("POST", "/v1/jobs/"+jobID+"/shards/preview", e.admin, body).must(e.t, http.StatusOK)
	scheduled, err := time.Parse(time.RFC3339Nano, got["scheduled_for"].(string))
	require.NoError(e.t, err)
	shards := got["shards"].([]any)
	params := make([]string, len(shards))
	for i, raw := range shards {
		s := raw.(map[string]any)
		require.Equal(e.t, float64(i), s["index"])
		require.Equal(e.t, float64(len(shards)), s["total"])
		params[i] = s["param"].(string)
	}
	return scheduled, params
}

type window struct{ from, to time.Time }

// windows decodes time_window params, checking each reads RFC 3339 with a
// numeric offset.
func windows(t *testing.T, params []string) []window {
	t.Helper()
	out := make([]window, len(params))
	for i, p := range params {
		var w struct{ From, To string }
		require.NoError(t, json.Unmarshal([]byte(p), &w))
		require.Regexp(t, `[+-]\d\d:\d\d$`, w.From, "offset, not Z")
		from, err := time.Parse(time.RFC3339Nano, w.From)
		require.NoError(t, err)
		to, err := time.Parse(time.RFC3339Nano, w.To)
		require.NoError(t, err)
		out[i] = window{from, to}
	}
	return out
}

// TestTimeWindowShardsAcrossLondonDST: a daily job at local midnight in
// Europe/London with 24 hourly windows of the last day, fired by the
// trigger loop on the day after each DST change of 2026, gets the local
// day's 24 hours: 23 hours in all after the spring-forward (the skipped
// hour's window empty), 25 after the fall-back (the repeated hour's window
// two hours long), every window labelled in local time; and the preview,
// asked before the fire, answered exactly what the tasks got.
func TestTimeWindowShardsAcrossLondonDST(t *testing.T) {
	t.Parallel()
	london, err := time.LoadLocation("Europe/London")
	require.NoError(t, err)
	for name, tc := range map[string]struct {
		day           time.Time // the local day the windows cover
		total         time.Duration
		oddHour       time.Duration // length of the window of local 01:00
		first, second string        // the params of shards 0 and 1, as written by hand
	}{
		"spring-forward": {day: time.Date(2026, 3, 29, 0, 0, 0, 0, london), total: 23 * time.Hour, oddHour: 0,
			first:  `{"from":"2026-03-29T00:00:00+00:00","to":"2026-03-29T02:00:00+01:00"}`,
			second: `{"from":"2026-03-29T02:00:00+01:00","to":"2026-03-29T02:00:00+01:00"}`},
		"fall-back": {day: time.Date(2026, 10, 25, 0, 0, 0, 0, london), total: 25 * time.Hour, oddHour: 2 * time.Hour,
			first:  `{"from":"2026-10-25T00:00:00+01:00","to":"2026-10-25T01:00:00+01:00"}`,
			second: `{"from":"2026-10-25T01:00:00+01:00","to":"2026-10-25T02:00:00+00:00"}`},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := setup(t)
			job := cronJob("daily-"+name, "0 0 * * *", "Europe/London")
			job["shards"] = map[string]any{"count": 24, "generator": map[string]any{"kind": "time_window", "window_seconds": 86400}}
			created := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)
			id := created["id"].(string)
			require.Equal(t, map[string]any{"count": float64(24),
				"generator": map[string]any{"kind": "time_window", "window_seconds": float64(86400)}}, created["shards"])

			// The job's next fire is the midnight that ends the day.
			fire := tc.day.AddDate(0, 0, 1)
			_, err := env.pool.Exec(context.Background(), `UPDATE ax.trigger SET next_fire_at = $2 WHERE job_id = $1`, id, fire)
			require.NoError(t, err)
			scheduled, preview := env.previewShards(id, nil)
			require.True(t, fire.Equal(scheduled), "preview defaults to the next fire %s, got %s", fire, scheduled)

			c := clock.New()
			c.Set(fire)
			loop := schedule.NewTriggerLoop(env.pool, nil, schedule.TriggerLoopConfig{Clock: c, FireAhead: -1})
			n, err := loop.FireDue(context.Background())
			require.NoError(t, err)
			require.Equal(t, 1, n)
			fired := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
			params := env.shardParams(fired["last_execution_id"].(string))

			require.Equal(t, preview, params, "the preview is what the fire wrote")
			require.Len(t, params, 24)
			require.JSONEq(t, tc.first, params[0])
			require.JSONEq(t, tc.second, params[1])
			ws := windows(t, params)
			require.True(t, ws[0].from.Equal(tc.day), "the first window starts at local midnight")
			require.True(t, ws[23].to.Equal(fire), "the last ends at the fire")
			var total time.Duration
			for i, w := range ws {
				if i != 1 || tc.oddHour != 0 { // the skipped 01:00 starts at the gap's end, 02:00
					require.Equal(t, i, w.from.In(london).Hour(), "window %d starts at local %02d:00", i, i)
				}
				if i > 0 {
					require.True(t, ws[i-1].to.Equal(w.from), "window %d starts where %d ended", i, i-1)
				}
				want := time.Hour
				if i == 1 {
					want = tc.oddHour
				}
				require.Equal(t, want, w.to.Sub(w.from), "window %d", i)
				total += w.to.Sub(w.from)
			}
			require.Equal(t, tc.total, total)
			_, again := env.previewShards(id, &fire)
			require.Equal(t, params, again, "a preview at the fired time answers the same")
		})
	}
}

// TestModShardsGetTheirResidues: each task of a mod job's run gets its own
// residue of the shard count, as the preview said.
func TestModShardsGetTheirResidues(t *testing.T) {
	t.Parallel()
	env := setup(t)
	id := env.manualJob("mod", func(j map[string]any) {
		j["shards"] = map[string]any{"count": 7, "generator": map[string]any{"kind": "mod"}}
	})
	params := env.shardParams(env.run(id, nil))
	require.Len(t, params, 7)
	residues := map[int]bool{}
	for i, p := range params {
		var m struct{ Modulus, Residue int }
		require.NoError(t, json.Unmarshal([]byte(p), &m))
		require.Equal(t, 7, m.Modulus)
		require.Equal(t, i, m.Residue)
		residues[m.Residue] = true
	}
	require.Len(t, residues, 7, "every residue once")
	at := time.Now()
	_, preview := env.previewShards(id, &at)
	require.Equal(t, params, preview)
}

// TestShardPreviewMatchesManualFires: for a manual fire (scheduled now, to
// the microsecond) of a time_window job, and for jobs with a list or a
// range of all of int64, the preview at the fire's scheduled time answers
// what its tasks got.
func TestShardPreviewMatchesManualFires(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for name, shards := range map[string]map[string]any{
		"time_window": {"count": 4, "generator": map[string]any{"kind": "time_window", "window_seconds": 3600}},
		"list":        {"count": 3, "params": []string{"a", "b", "c"}},
		"range":       {"count": 7, "range": map[string]any{"from": int64(-9223372036854775808), "to": int64(9223372036854775807)}},
		"default":     {"count": 5},
	} {
		id := env.manualJob("preview-"+name, func(j map[string]any) {
			j["shards"] = shards
			j["trigger"] = map[string]any{"kind": "manual", "timezone": "America/New_York"}
		})
		execID := env.run(id, nil)
		exec := env.call("GET", "/v1/executions/"+execID, env.admin, nil).must(t, http.StatusOK)
		at, err := time.Parse(time.RFC3339Nano, exec["scheduled_for"].(string))
		require.NoError(t, err)
		params := env.shardParams(execID)
		_, preview := env.previewShards(id, &at)
		require.Equal(t, params, preview, name)
		if name == "time_window" {
			ws := windows(t, params)
			require.True(t, ws[3].to.Equal(at), "windows end at the fire")
			require.Equal(t, 15*time.Minute, ws[0].to.Sub(ws[0].from))
			_, off := at.In(mustLoad(t, "America/New_York")).Zone()
			require.Equal(t, off, func() int { _, o := ws[0].from.Zone(); return o }(), "labelled in the job's timezone")
		}
	}
}

func mustLoad(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	require.NoError(t, err)
	return loc
}

// TestShardGeneratorValidation: bad generators are refused with a problem
// naming the field, and nothing is stored.
func TestShardGeneratorValidation(t *testing.T) {
	t.Parallel()
	env := setup(t)
	gen := func(g map[string]any, extra map[string]any) map[string]any {
		s := map[string]any{"count": 24, "generator": g}
		for k, v := range extra {
			s[k] = v
		}
		return s
	}
	tw := map[string]any{"kind": "time_window", "window_seconds": 86400}
	for name, tc := range map[string]struct {
		shards map[string]any
		route  map[string]any
		loc    string
	}{
		"window missing":  {shards: gen(map[string]any{"kind": "time_window"}, nil), loc: "body.shards.generator.window_seconds"},
		"uneven split":    {shards: map[string]any{"count": 7, "generator": tw}, loc: "body.shards.generator.window_seconds"},
		"window too long": {shards: gen(map[string]any{"kind": "time_window", "window_seconds": 31622401}, nil), loc: "body.shards.generator.window_seconds"},
		"window with mod": {shards: gen(map[string]any{"kind": "mod", "window_seconds": 60}, nil), loc: "body.shards.generator.window_seconds"},
		"unknown kind":    {shards: gen(map[string]any{"kind": "hash"}, nil), loc: "body.shards.generator.kind"},
		"with params":     {shards: map[string]any{"count": 2, "params": []string{"a", "b"}, "generator": map[string]any{"kind": "mod"}}, loc: "body.shards.params"},
		"with range":      {shards: gen(tw, map[string]any{"range": map[string]any{"from": 0, "to": 100}}), loc: "body.shards.range"},
		"broadcast":       {shards: map[string]any{"generator": map[string]any{"kind": "mod"}}, route: map[string]any{"strategy": "broadcast"}, loc: "body.shards.generator"},
	} {
		job := cronJob("bad-"+name, "0 0 * * *", "Europe/London")
		job["shards"] = tc.shards
		if tc.route != nil {
			job["route"] = tc.route
		}
		resp := env.call("POST", "/v1/jobs", env.admin, job)
		require.Equal(t, http.StatusUnprocessableEntity, resp.status, "%s: %s", name, resp.raw)
		require.Contains(t, resp.errorLocations(), tc.loc, "%s: %s", name, resp.raw)
	}
	require.Equal(t, 0, env.countJobs())
}

// TestShardGeneratorRoundTrip: a job read back can be PUT back unchanged
// (no range shows beside a generator), and dropping the generator brings
// the range back.
func TestShardGeneratorRoundTrip(t *testing.T) {
	t.Parallel()
	env := setup(t)
	job := cronJob("round-trip", "0 * * * *", "Europe/London")
	job["shards"] = map[string]any{"count": 4, "generator": map[string]any{"kind": "time_window", "window_seconds": 3600}}
	created := env.call("POST", "/v1/jobs", env.admin, job).must(t, http.StatusCreated)
	id := created["id"].(string)
	got := env.call("GET", "/v1/jobs/"+id, env.admin, nil).must(t, http.StatusOK)
	put := env.call("PUT", "/v1/jobs/"+id, env.admin, got).must(t, http.StatusOK)
	require.Equal(t, got["shards"], put["shards"])

	patched := env.call("PATCH", "/v1/jobs/"+id, env.admin, map[string]any{"shards": map[string]any{"generator": nil}})
	body := patched.must(t, http.StatusOK)
	require.Equal(t, map[string]any{"count": float64(4), "range": map[string]any{"from": float64(0), "to": float64(1 << 32)}}, body["shards"])
}

// TestShardPreviewProblems: a job that will not fire on its own needs a
// time; an unknown job is 404.
func TestShardPreviewProblems(t *testing.T) {
	t.Parallel()
	env := setup(t)
	id := env.manualJob("manual", nil)
	resp := env.call("POST", "/v1/jobs/"+id+"/shards/preview", env.admin, nil)
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, string(resp.raw))
	require.Equal(t, []string{"body.at"}, resp.errorLocations())
	resp = env.call("POST", fmt.Sprintf("/v1/jobs/%s/shards/preview", "0192f0c1-0000-7000-8000-000000000000"), env.admin, map[string]any{})
	require.Equal(t, http.StatusNotFound, resp.status, string(resp.raw))
	resp = env.call("POST", "/v1/jobs/"+id+"/shards/preview", env.admin, `{"at": "yesterday"}`)
	require.Equal(t, http.StatusUnprocessableEntity, resp.status, string(resp.raw))
	require.Contains(t, resp.errorLocations(), "body.at")
}
