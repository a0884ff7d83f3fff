package cluster

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db/pglocal"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestPostgresRestartDuringRun restarts Postgres under a running server and
// two agents while two jobs fire every second. Postgres is a private
// throwaway cluster (the shared one on 127.0.0.1:5432 serves other tests),
// stopped with pg_ctl stop -m fast for a few seconds and started again on
// the same port. Afterwards the processes are alive, fires go on, every
// execution succeeds, and every tick is accounted for exactly once: fired
// once (execution_tick_once) or recorded as skipped (missed during the
// outage), never both, never twice.
func TestPostgresRestartDuringRun(t *testing.T) {
	t.Parallel()
	pg, err := pglocal.Find(t.Context(), pglocal.Options{SkipEnv: true, SkipLocal: true})
	if errors.Is(err, pglocal.ErrNoBinaries) {
		t.Skipf("cannot start a private PostgreSQL cluster to restart: %v", err)
	}
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, pg.Stop()) }) // last: after the processes using it

	s := e2ekit.StartServerOn(t, pg.URL)
	agents := []*proctest.Process{s.RunAgent(t, "a1", s.URL), s.RunAgent(t, "a2", s.URL)}
	s.AgentReady(t, "a1")
	s.AgentReady(t, "a2")
	jobs := []string{
		s.CreateJob(t, map[string]any{
			"name":     "every-second-interval",
			"trigger":  map[string]any{"kind": "interval", "interval_seconds": 1},
			"executor": map[string]any{"kind": "shell", "command": `echo "tick $AX_EXECUTION_ID"`},
		}),
		s.CreateJob(t, map[string]any{
			"name":     "every-second-cron",
			"trigger":  map[string]any{"kind": "cron", "cron": "* * * * * *"},
			"executor": map[string]any{"kind": "shell", "command": `echo "tick $AX_EXECUTION_ID"`},
		}),
	}
	pool := e2ekit.OpenPool(t, pg.URL)
	succeededSince := func(since time.Time) (n int) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		err := pool.QueryRow(ctx, `SELECT coalesce(min(n), 0) FROM (
			SELECT count(e.id) AS n FROM ax.job j
			LEFT JOIN ax.all_executions e ON e.job_id = j.id AND e.state = 'succeeded' AND e.scheduled_for > $1
			GROUP BY j.id) per_job`, since).Scan(&n)
		if err != nil {
			return 0 // the database is away
		}
		return n
	}
	began := time.Now()
	require.Eventually(t, func() bool { return succeededSince(began) >= 3 }, 30*time.Second, 100*time.Millisecond,
		"both jobs run before the restart")

	down := time.Now()
	require.NoError(t, pg.Halt())
	require.Eventually(t, func() bool { return httpStatus(s.URL+"/readyz") != http.StatusOK }, 10*time.Second,
		50*time.Millisecond, "the server notices the database is away")
	// The outage: longer than the 5 s misfire threshold, so that the ticks of
	// its start are missed (one catch-up fire, the rest recorded as skipped)
	// while heartbeats, leases and results fail.
	time.Sleep(7 * time.Second)
	require.NoError(t, pg.Start(t.Context()))
	up := time.Now()
	t.Logf("Postgres away for %s", up.Sub(down).Round(time.Millisecond))

	require.Eventually(t, func() bool { return httpStatus(s.URL+"/readyz") == http.StatusOK }, 20*time.Second,
		50*time.Millisecond, "the server is ready again")
	require.Eventually(t, func() bool { return succeededSince(up) >= 3 }, 40*time.Second, 100*time.Millisecond,
		"both jobs fire and run again after the restart")
	t.Logf("fires run again %s after Postgres came back", time.Since(up).Round(time.Millisecond))

	for _, id := range jobs {
		status, out := s.API(t, "POST", "/v1/jobs/"+id+"/pause", nil)
		require.Equal(t, http.StatusOK, status, out)
	}
	require.Eventually(t, func() bool {
		var unfinished int
		err := pool.QueryRow(context.Background(),
			`SELECT count(*) FROM ax.all_executions WHERE state IN ('pending', 'running')`).Scan(&unfinished)
		return err == nil && unfinished == 0
	}, 40*time.Second, 100*time.Millisecond, "every execution ends")

	require.True(t, s.Proc.Running(), "the server survived the restart")
	for _, a := range agents {
		require.True(t, a.Running(), "the agents survived the restart")
	}
	requireNothingLost(t, pool, down, up)
}

// requireNothingLost checks the history of the every-second jobs: every
// execution succeeded with one success per task and no attempt with two
// results, no tick fired twice, and each tick from the first fire to the
// last is either one execution or recorded as skipped, never both; and the
// fires of each job span the outage from down to up.
func requireNothingLost(t *testing.T, pool *pgxpool.Pool, down, up time.Time) {
	t.Helper()
	ctx := context.Background()
	var total, succeeded, distinctTicks, catchUps int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE state = 'succeeded'),
		       count(DISTINCT (job_id, scheduled_for)), count(*) FILTER (WHERE cause = 'catch_up')
		FROM ax.all_executions`).Scan(&total, &succeeded, &distinctTicks, &catchUps))
	t.Logf("%d executions, %d catch-up fires", total, catchUps)
	require.Equal(t, total, succeeded, "every execution succeeded")
	require.Equal(t, total, distinctTicks, "no tick fired twice")

	var badTasks int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*) FROM ax.all_tasks t
		WHERE t.state <> 'succeeded'
		   OR (SELECT count(*) FROM ax.all_task_events e WHERE e.task_id = t.id AND e.kind = 'state'
		       AND e.state = 'succeeded') <> 1
		   -- A retry (a lease that ran out in the outage) ends its attempt
		   -- with a result of its own; no attempt has two.
		   OR EXISTS (SELECT FROM ax.all_task_events e WHERE e.task_id = t.id AND e.kind = 'state'
		              AND e.state IN ('succeeded', 'failed', 'cancelled', 'timed_out')
		              GROUP BY e.attempt HAVING count(*) > 1)`).Scan(&badTasks))
	require.Zero(t, badTasks, "every task has exactly one success, and no attempt two results")

	// Every tick of each job between its first and last fire, with how
	// often it fired and how often it was recorded as skipped.
	rows, err := pool.Query(ctx, `
		WITH span AS (
		    SELECT job_id, min(scheduled_for) AS first, max(scheduled_for) AS last
		    FROM ax.all_executions GROUP BY job_id
		), tick AS (
		    SELECT s.job_id, g.at FROM span s, generate_series(s.first, s.last, interval '1 second') g(at)
		)
		SELECT t.job_id::text, t.at,
		       (SELECT count(*) FROM ax.all_executions e WHERE e.job_id = t.job_id AND e.scheduled_for = t.at),
		       (SELECT count(*) FROM ax.skipped_fire k, generate_series(k.first_tick, k.last_tick, interval '1 second') g(at)
		        WHERE k.job_id = t.job_id AND g.at = t.at)
		FROM tick t ORDER BY t.job_id, t.at`)
	require.NoError(t, err)
	defer rows.Close()
	ticks, skipped := 0, 0
	for rows.Next() {
		var job string
		var at time.Time
		var fired, skips int
		require.NoError(t, rows.Scan(&job, &at, &fired, &skips))
		require.Equal(t, 1, fired+skips, "job %s tick %s: fired %d times, skipped %d times", job, at, fired, skips)
		ticks++
		skipped += skips
	}
	require.NoError(t, rows.Err())
	var spanning int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM (SELECT job_id FROM ax.all_executions GROUP BY job_id
		HAVING min(scheduled_for) < $1 AND max(scheduled_for) > $2) j`, down, up).Scan(&spanning))
	require.Equal(t, 2, spanning, "the fires of both jobs span the outage")
	t.Logf("%d ticks accounted for, %d of them skipped as missed during the outage", ticks, skipped)
}

// httpStatus GETs url and returns the status, 0 when nothing answers.
func httpStatus(url string) int {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
