package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// scrape returns the value of each sample on /metrics, keyed by its name
// with labels (`ax_fires_total{cause="manual"}`).
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	out, err := tryScrape(url)
	require.NoError(t, err)
	return out
}

// tryScrape is scrape for a caller that polls: it returns the error.
func tryScrape(url string) (map[string]float64, error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, sc.Err()
}

// missAMinute makes the job's trigger look as after a minute-long outage:
// its next fire a minute in the past, and its last fired tick before it.
// (Moving only the next fire raced with the loop: a tick it had fired
// since the job was made was later than the missed one, which then
// counted as fired already and was not caught up.)
func missAMinute(t *testing.T, pool *pgxpool.Pool, jobID string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE ax.trigger SET next_fire_at = now() - interval '60 seconds',
		last_scheduled_for = now() - interval '61 seconds' WHERE job_id = $1`, jobID)
	require.NoError(t, err)
}

func TestMetricsMoveAsJobsFire(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	before := scrape(t, s.URL)
	for _, name := range []string{`ax_fires_total{cause="schedule"}`, `ax_fires_total{cause="manual"}`,
		`ax_misfires_total`, `ax_skipped_ticks_total{reason="misfire"}`, `ax_fire_lag_seconds_count`,
		`ax_tasks_dispatched_total{class="none"}`, `ax_dispatch_failures_total`, `ax_lease_checks_total`, `ax_task_results_total{error_code="",state="succeeded"}`,
		`ax_task_results_total{error_code="timeout",state="timed_out"}`, `ax_task_retries_total`, `ax_lease_expiries_total`,
		`ax_queue_depth{class="none",priority="0"}`, `ax_queue_oldest_wait_seconds{class="none",priority="0"}`,
		`ax_api_turn_wait_seconds_count`, `ax_api_turns_refused_total`} {
		require.Contains(t, before, name)
	}

	create := func(body string) string {
		req, _ := http.NewRequest("POST", s.URL+"/v1/jobs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+s.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode)
		var j struct{ ID string }
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&j))
		return j.ID
	}
	create(`{"name":"every-second","trigger":{"kind":"cron","cron":"* * * * * *"},"executor":{"kind":"shell","command":"true"}}`)
	manual := create(`{"name":"by-hand","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"}}`)
	late := create(`{"name":"late","trigger":{"kind":"interval","interval_seconds":1},"misfire":{"policy":"fire_once"},"executor":{"kind":"shell","command":"true"}}`)

	// An outage for one job: its next fire a minute in the past.
	pool, err := pgxpool.New(context.Background(), s.DBURL)
	require.NoError(t, err)
	defer pool.Close()
	missAMinute(t, pool, late)

	req, _ := http.NewRequest("POST", s.URL+"/v1/jobs/"+manual+"/trigger", bytes.NewReader(nil))
	req.Header.Set("Authorization", "Bearer "+s.Key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)

	require.Eventually(t, func() bool {
		after := scrape(t, s.URL)
		return after[`ax_fires_total{cause="schedule"}`] >= before[`ax_fires_total{cause="schedule"}`]+2 &&
			after[`ax_fires_total{cause="manual"}`] == before[`ax_fires_total{cause="manual"}`]+1 &&
			after[`ax_fires_total{cause="catch_up"}`] >= 1 &&
			after[`ax_misfires_total`] >= 50 &&
			after[`ax_skipped_ticks_total{reason="misfire"}`] >= 50 &&
			after[`ax_fire_lag_seconds_count`] >= 2 &&
			after[`ax_queue_depth{class="none",priority="0"}`] >= 3 // no agent runs them
	}, 15*time.Second, 200*time.Millisecond)
}
