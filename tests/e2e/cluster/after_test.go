package cluster

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestAfterDAGAcrossReplicas runs a graph of 5 jobs on 3 `ax serve`
// processes: three extracts fire every 2 s (agentless HTTP calls to a
// local server), a load runs after all three, a report after the load.
// One replica is SIGKILLed mid-way. For every logical time whose three
// extracts succeeded, the load and the report ran exactly once, each
// after all of its upstreams had finished, with that logical time; a time
// whose extract failed has no load, and a recorded upstream_failed skip;
// no load or report carries a time no extract had.
func TestAfterDAGAcrossReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 30 s")
	}
	t.Parallel()
	const loopback = "AX_OUTBOUND_ALLOW_LOOPBACK=true"
	proctest.ReserveServers(t, 3)
	first := e2ekit.StartServerOn(t, dbtest.NewURL(t), loopback)
	pool, err := pgxpool.New(context.Background(), first.DBURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The two other replicas start side by side.
	var replicas []*proctest.Process
	var addrs []string
	for range 2 {
		addr := proctest.FreeAddr(t)
		replicas = append(replicas, proctest.Start(t, proctest.Binary(t, "ax"),
			[]string{"DATABASE_URL=" + first.DBURL, "AX_ADDR=" + addr, loopback}, "serve"))
		addrs = append(addrs, addr)
	}
	for _, addr := range addrs {
		proctest.WaitHTTP(t, "http://"+addr+"/readyz", 90*time.Second)
	}
	victim := replicas[0]
	started := time.Now()

	// The third extract fails on its 3rd and 6th calls: those logical
	// times' loads must be skipped.
	var ex3Calls atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ex3" {
			if n := ex3Calls.Add(1); n == 3 || n == 6 {
				w.WriteHeader(http.StatusInternalServerError)
				return
			}
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(target.Close)
	job := func(name string, trigger map[string]any) string {
		return first.CreateJob(t, map[string]any{"name": name, "group": "dag", "trigger": trigger,
			"timeout_seconds": 5, "retry": map[string]any{"max_attempts": 1},
			"executor": map[string]any{"kind": "http", "url": target.URL + "/" + name}})
	}
	upstream := func(names ...string) []any {
		var out []any
		for _, n := range names {
			out = append(out, map[string]any{"job": "dag/" + n, "on": "success"})
		}
		return out
	}
	// The downstream jobs first, on jobs that exist but do not fire yet:
	// the extracts are created paused and resumed together.
	var extracts []string
	for _, n := range []string{"ex1", "ex2", "ex3"} {
		id := job(n, map[string]any{"kind": "cron", "cron": "*/2 * * * * *"})
		status, _ := first.API(t, "POST", "/v1/jobs/"+id+"/pause", nil)
		require.Equal(t, http.StatusOK, status)
		extracts = append(extracts, id)
	}
	load := job("load", map[string]any{"kind": "after", "mode": "all", "upstream": upstream("ex1", "ex2", "ex3")})
	report := job("report", map[string]any{"kind": "after", "upstream": upstream("load")})
	// Paused ticks are recorded as skipped when a job resumes: only the
	// ticks from here on count.
	begin := time.Now()
	for _, id := range extracts {
		status, _ := first.API(t, "POST", "/v1/jobs/"+id+"/resume", nil)
		require.Equal(t, http.StatusOK, status)
	}

	ranLoads := func() (n int) {
		_ = pool.QueryRow(context.Background(), `SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND finished_at IS NOT NULL`,
			load).Scan(&n)
		return n
	}
	require.Eventually(t, func() bool { return ranLoads() >= 2 }, 30*time.Second, 100*time.Millisecond, "loads run")
	victim.Signal(syscall.SIGKILL)
	require.Error(t, victim.Wait(10*time.Second), "killed")
	require.Eventually(t, func() bool { return ex3Calls.Load() >= 7 }, 30*time.Second, 100*time.Millisecond,
		"the extracts go on after the kill")
	for _, id := range extracts {
		status, _ := first.API(t, "POST", "/v1/jobs/"+id+"/pause", nil)
		require.Equal(t, http.StatusOK, status)
	}

	// Every logical time of the extracts is settled: its runs ended, and
	// its load (and its report) ran or was skipped. A run the victim held
	// ends by its timeout (5 s); one whose request it had fetched and not
	// sent is handed on within about 30 s of the kill (ax's rescue, after
	// a new River leader if the victim led).
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var unsettled []string
		err := pool.QueryRow(context.Background(), `
			SELECT coalesce(array_agg(u), '{}') FROM (
				SELECT 'run ' || e.id || ' ' || e.state || ', tasks: ' || coalesce((
				           SELECT string_agg(t.state || ' attempt ' || t.attempt, ', ') FROM ax.task t WHERE t.execution_id = e.id), 'none')
				FROM ax.execution e WHERE e.job_id = ANY($1::uuid[])
				UNION ALL
				SELECT 'wait of job ' || w.job_id || ' ready' FROM ax.after_wait w WHERE w.state = 'ready') x(u)`,
			[]string{extracts[0], extracts[1], extracts[2], load, report}).Scan(&unsettled)
		require.NoError(c, err)
		assert.Empty(c, unsettled, "not settled")
	}, 60*time.Second, 100*time.Millisecond, "every run ended")

	type logical struct {
		at                  time.Time
		extracts, succeeded int
		lastExtractEnd      time.Time
	}
	rows, err := pool.Query(context.Background(), `
		SELECT scheduled_for, count(*), count(*) FILTER (WHERE state = 'succeeded'), max(finished_at)
		FROM ax.all_executions WHERE job_id = ANY($1::uuid[]) AND fired_at >= $2
		GROUP BY scheduled_for ORDER BY scheduled_for`, extracts, begin)
	require.NoError(t, err)
	var times []logical
	for rows.Next() {
		var l logical
		require.NoError(t, rows.Scan(&l.at, &l.extracts, &l.succeeded, &l.lastExtractEnd))
		times = append(times, l)
	}
	require.NoError(t, rows.Err())

	runsAt := func(jobID string, at time.Time) (n int, started, finished time.Time, state string) {
		t.Helper()
		require.NoError(t, pool.QueryRow(context.Background(), `
			SELECT count(*), coalesce(min(started_at), 'epoch'), coalesce(max(finished_at), 'epoch'), coalesce(max(state::text), '')
			FROM ax.all_executions WHERE job_id = $1 AND scheduled_for = $2`, jobID, at).Scan(&n, &started, &finished, &state))
		return n, started, finished, state
	}
	var ran, skipped int
	for _, l := range times {
		nLoad, loadStart, loadEnd, loadState := runsAt(load, l.at)
		nReport, reportStart, _, _ := runsAt(report, l.at)
		switch {
		case l.extracts == 3 && l.succeeded == 3:
			require.Equal(t, 1, nLoad, "one load for %s", l.at)
			require.True(t, loadStart.After(l.lastExtractEnd), "the load of %s started after its extracts ended", l.at)
			if loadState == "succeeded" {
				require.Equal(t, 1, nReport, "one report for %s", l.at)
				require.True(t, reportStart.After(loadEnd), "the report of %s started after its load ended", l.at)
			}
			ran++
		case l.extracts == 3:
			require.Zero(t, nLoad, "no load for %s: an extract failed", l.at)
			require.Zero(t, nReport)
			var skips int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM ax.skipped_fire
				WHERE job_id = $1 AND reason = 'upstream_failed' AND first_tick = $2`, load, l.at).Scan(&skips))
			require.Equal(t, 1, skips, "the skip of %s is recorded", l.at)
			skipped++
		default: // the extracts were paused between two of them
			require.Zero(t, nLoad)
		}
	}
	// Never a run for a time no extract had.
	var strays int
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT count(*) FROM ax.all_executions d WHERE d.job_id IN ($1, $2)
		AND NOT EXISTS (SELECT 1 FROM ax.all_executions x WHERE x.job_id = ANY($3::uuid[]) AND x.scheduled_for = d.scheduled_for)`,
		load, report, extracts).Scan(&strays))
	require.Zero(t, strays)
	t.Logf("%d logical times: %d loads ran, %d skipped; %s from the replicas' start", len(times), ran, skipped,
		time.Since(started).Round(time.Second))
	require.GreaterOrEqual(t, ran, 3)
	require.GreaterOrEqual(t, skipped, 1)
}
