package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// executionsOf counts a job's executions.
func executionsOf(t *testing.T, pool *pgxpool.Pool, jobID string) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, jobID).Scan(&n))
	return n
}

// requireFiresOnTime waits until job has fired n times and checks that
// no second was skipped between its first fire and its last, each fire
// made within 3 s of its tick. A job that held up the others would stop
// them firing at all, or skip their ticks; the margin is for a loaded
// machine running race-built processes, where fires came 1.1 s late.
func requireFiresOnTime(t *testing.T, pool *pgxpool.Pool, jobID string, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return executionsOf(t, pool, jobID) >= n },
		time.Duration(n+10)*time.Second, 50*time.Millisecond, "job %s fires %d times", jobID, n)
	var late float64
	var fires, seconds int
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT coalesce(max(extract(epoch FROM fired_at - scheduled_for)), 0)::float8, count(*),
		       coalesce(extract(epoch FROM max(scheduled_for) - min(scheduled_for))::int + 1, 0)
		FROM ax.all_executions WHERE job_id = $1`, jobID).Scan(&late, &fires, &seconds))
	require.Equal(t, seconds, fires, "job %s fired every second once, from its first fire to its last", jobID)
	require.Less(t, late, 3.0, "fires of job %s are late", jobID)
}

// A shard range spanning all of bigint used to overflow the task insert,
// and so roll back every batch it was in: no job fired while it existed.
func TestFullInt64ShardRangeFiresBesideHealthyJob(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	healthy := s.CreateJob(t, e2ekit.EverySecond("healthy"))
	wide := e2ekit.EverySecond("whole-bigint")
	wide["shards"] = map[string]any{"count": 4,
		"range": map[string]any{"from": int64(-1 << 63), "to": int64(1<<63 - 1)}}
	wideID := s.CreateJob(t, wide)

	requireFiresOnTime(t, pool, healthy, 3)
	requireFiresOnTime(t, pool, wideID, 2)
	rows, err := pool.Query(context.Background(), `SELECT t.shard_param FROM ax.all_tasks t
		WHERE t.execution_id = (SELECT id FROM ax.all_executions WHERE job_id = $1 ORDER BY scheduled_for LIMIT 1) ORDER BY t.shard_index`, wideID)
	require.NoError(t, err)
	var params []string
	for rows.Next() {
		var p string
		require.NoError(t, rows.Scan(&p))
		params = append(params, p)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{
		"-9223372036854775808--4611686018427387905",
		"-4611686018427387905--1",
		"-1-4611686018427387903",
		"4611686018427387903-9223372036854775807",
	}, params, "the shards split the whole range")
	_, job := s.API(t, "GET", "/v1/jobs/"+wideID, nil)
	require.NotContains(t, job, "set_aside_at")
}

// A job whose fire fails in the database (here a fault injected with a
// trigger on ax.task) is set aside with its reason, counted and logged;
// the healthy job beside it keeps firing on time. Updating the job clears
// the mark and it fires again.
func TestFailingJobIsSetAsideAndOthersFireOnTime(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `
		CREATE FUNCTION public.poison_task() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF (SELECT name FROM ax.job WHERE id = NEW.job_id) = 'broken' THEN
				RAISE EXCEPTION 'injected fault for job %', NEW.job_id USING ERRCODE = '22003';
			END IF;
			RETURN NEW;
		END $$`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `CREATE TRIGGER poison BEFORE INSERT ON ax.task FOR EACH ROW EXECUTE FUNCTION public.poison_task()`)
	require.NoError(t, err)
	broken := e2ekit.EverySecond("broken")
	brokenID := s.CreateJob(t, broken)
	healthy := s.CreateJob(t, e2ekit.EverySecond("healthy"))

	requireFiresOnTime(t, pool, healthy, 3)
	var job map[string]any
	require.Eventually(t, func() bool {
		_, job = s.API(t, "GET", "/v1/jobs/"+brokenID, nil)
		return job["set_aside_at"] != nil
	}, 10*time.Second, 50*time.Millisecond, "the broken job is set aside")
	require.Contains(t, job["set_aside_reason"], "injected fault for job "+brokenID)
	require.Zero(t, executionsOf(t, pool, brokenID), "the broken job's fires rolled back")
	var reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT set_aside_reason FROM ax.set_aside_jobs WHERE job_id = $1`, brokenID).Scan(&reason))
	require.Contains(t, reason, "injected fault")
	samples := scrape(t, s.URL)
	require.GreaterOrEqual(t, samples[`ax_trigger_set_aside_total{step="write"}`], 1.0)
	require.Equal(t, 1.0, samples[`ax_triggers_set_aside`], "the gauge behind alert AxJobSetAside")
	require.Contains(t, s.Proc.Output(), "job set aside")
	require.Contains(t, s.Proc.Output(), brokenID)

	// Fixed and updated: it fires again.
	_, err = pool.Exec(ctx, `DROP TRIGGER poison ON ax.task`)
	require.NoError(t, err)
	broken["description"] = "fixed"
	status, out := s.API(t, "PUT", "/v1/jobs/"+brokenID, broken)
	require.Equal(t, http.StatusOK, status, out)
	require.NotContains(t, out, "set_aside_at")
	require.Eventually(t, func() bool { return executionsOf(t, pool, brokenID) > 0 },
		10*time.Second, 50*time.Millisecond, "the updated job fires again")
	require.False(t, strings.Contains(s.Proc.Output(), "panic"))
}
