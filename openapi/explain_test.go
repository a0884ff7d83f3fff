package openapi_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/schedule"
)

// explain asks GET /v1/jobs/{id}/explain?at=at.
func (e *apiEnv) explain(t *testing.T, jobID, at string) map[string]any {
	t.Helper()
	return e.call("GET", "/v1/jobs/"+jobID+"/explain?at="+url.QueryEscape(at), e.admin, nil).must(t, http.StatusOK)
}

// tickBehind moves a job's next fire to the whole second d ago (as if no
// replica had fired since) and returns it.
func (e *apiEnv) tickBehind(t *testing.T, jobID string, d time.Duration) time.Time {
	t.Helper()
	var next time.Time
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`UPDATE ax.trigger SET next_fire_at = date_trunc('second', now()) - $2::interval WHERE job_id = $1
		 RETURNING next_fire_at`, jobID, d.String()).Scan(&next))
	return next.UTC()
}

// "Why didn't it run at T?" answered from what the trigger loop recorded:
// a run that exists, a misfire, an overlap naming the run still
// unfinished, a paused tick, an instant that is not a tick, and a wall
// time in a daylight-saving gap.
func TestExplainTick(t *testing.T) {
	t.Parallel()
	env := setup(t)
	loop := schedule.NewTriggerLoop(env.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1})
	fire := func() {
		t.Helper()
		_, err := loop.FireDue(context.Background())
		require.NoError(t, err)
	}
	create := func(body map[string]any) string {
		t.Helper()
		return env.call("POST", "/v1/jobs", env.admin, body).must(t, http.StatusCreated)["id"].(string)
	}

	t.Run("a run that exists", func(t *testing.T) {
		id := create(cronJob("every-second", "* * * * * *", "UTC"))
		tick := env.tickBehind(t, id, time.Second)
		fire()
		got := env.explain(t, id, tick.Format(time.RFC3339))
		require.Equal(t, "fired", got["verdict"], got)
		require.Equal(t, true, got["tick"])
		run := got["execution"].(map[string]any)
		require.Equal(t, tick.Format(time.RFC3339), run["scheduled_for"])
		require.Contains(t, got["reason"], run["id"].(string))
	})

	t.Run("a misfire", func(t *testing.T) {
		body := cronJob("missed", "* * * * * *", "UTC")
		body["misfire"] = map[string]any{"policy": "skip"}
		id := create(body)
		tick := env.tickBehind(t, id, time.Hour)
		fire()
		got := env.explain(t, id, tick.Add(10*time.Second).Format(time.RFC3339))
		require.Equal(t, "skipped", got["verdict"], got)
		require.Equal(t, "misfire", got["skip"].(map[string]any)["reason"])
		require.Contains(t, got["reason"], "misfire")
	})

	t.Run("an overlap names the run still unfinished", func(t *testing.T) {
		body := cronJob("overlapping", "* * * * * *", "UTC")
		body["concurrency_policy"] = "forbid"
		id := create(body)
		first := env.tickBehind(t, id, 3*time.Second)
		fire() // the first tick fires; no agent runs it, so it stays unfinished
		fire() // the next ticks are due and overlap it
		got := env.explain(t, id, first.Add(time.Second).Format(time.RFC3339))
		require.Equal(t, "skipped", got["verdict"], got)
		require.Equal(t, "overlap", got["skip"].(map[string]any)["reason"])
		require.NotNil(t, got["running"], got)
		running := got["running"].(map[string]any)
		require.Equal(t, first.Format(time.RFC3339), running["scheduled_for"])
		require.Contains(t, got["reason"], running["id"].(string))
	})

	t.Run("a paused tick", func(t *testing.T) {
		id := create(cronJob("hourly", "0 0 * * * ?", "UTC"))
		env.call("POST", "/v1/jobs/"+id+"/pause", env.admin, nil).must(t, http.StatusOK)
		_, err := env.pool.Exec(context.Background(),
			"UPDATE ax.trigger SET paused_at = now() - interval '3 hours' WHERE job_id = $1", id)
		require.NoError(t, err)
		_, err = env.pool.Exec(context.Background(),
			"UPDATE ax.job SET created_at = now() - interval '1 day' WHERE id = $1", id)
		require.NoError(t, err)
		tick := time.Now().UTC().Truncate(time.Hour).Add(-time.Hour)
		got := env.explain(t, id, tick.Format(time.RFC3339))
		require.Equal(t, "paused", got["verdict"], got)
		require.Equal(t, true, got["tick"])
		require.Contains(t, got["reason"], "paused since")
	})

	t.Run("not a tick", func(t *testing.T) {
		id := create(cronJob("at-eight", "0 0 8 * * ?", "Asia/Shanghai"))
		got := env.explain(t, id, "2030-01-02T08:30:00") // a wall time in Shanghai
		require.Equal(t, "not_a_tick", got["verdict"], got)
		require.Equal(t, false, got["tick"])
		require.Equal(t, "2030-01-02T00:30:00Z", got["at"])
		require.Equal(t, "2030-01-02T08:30:00+08:00", got["local"])
		require.Equal(t, "2030-01-03T00:00:00Z", got["next_tick"], "08:00 the next day in Shanghai")
	})

	t.Run("a wall time in a daylight-saving gap", func(t *testing.T) {
		id := create(cronJob("half-past-one", "0 30 1 * * ?", "Europe/London"))
		// On 2027-03-28 London's clocks go from 01:00 GMT to 02:00 BST:
		// 01:30 never happens, and that day's tick fires at 02:00 BST.
		got := env.explain(t, id, "2027-03-28T01:30:00")
		require.Equal(t, "dst_gap", got["verdict"], got)
		require.Equal(t, "2027-03-28T01:00:00Z", got["at"])
		require.Equal(t, "2027-03-28T02:00:00+01:00", got["local"])
		require.Equal(t, true, got["tick"], "the end of the gap is where the tick fires")
		require.Contains(t, got["reason"], "does not exist in Europe/London")
	})

	t.Run("bad input", func(t *testing.T) {
		id := create(cronJob("bad-at", "0 0 8 * * ?", "UTC"))
		for _, at := range []string{"yesterday", "2026-13-01T00:00:00Z", "1970-01-01T00:00:00Z"} {
			resp := env.call("GET", "/v1/jobs/"+id+"/explain?at="+url.QueryEscape(at), env.admin, nil)
			resp.must(t, http.StatusUnprocessableEntity)
			require.Contains(t, resp.errorLocations(), "query.at", at)
		}
		env.call("GET", "/v1/jobs/01900000-0000-7000-8000-000000000000/explain?at=2026-01-01T00:00:00Z", env.admin, nil).
			must(t, http.StatusNotFound)
	})
}
