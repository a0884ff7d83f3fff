package db_test

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// overviewJob adds a job of group/name and returns its id.
func (e *planEnv) overviewJob(group, name string) uuid.UUID {
	e.t.Helper()
	var id uuid.UUID
	require.NoError(e.t, e.conn.QueryRow(context.Background(), `
		INSERT INTO ax.job (name, group_name, trigger_kind, executor_kind, executor, agentless)
		VALUES ($2, $1, 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id`,
		group, name).Scan(&id))
	return id
}

// addRuns adds runs of job fired at fired in state, one per duration in
// took (ended runs finish that long after firing). Their ids are UUIDv7
// of their fire time, as the engine makes them.
func (e *planEnv) addRuns(job uuid.UUID, fired time.Time, state axtype.ExecutionState, took ...float64) {
	e.t.Helper()
	_, err := e.conn.Exec(context.Background(), `
		INSERT INTO ax.execution (id, job_id, cause, scheduled_for, fired_at, state, shard_count, priority, started_at, finished_at)
		SELECT (lpad(to_hex(floor(extract(epoch FROM $2::timestamptz) * 1000)::bigint), 12, '0')
		        || substr(md5(random()::text), 13, 20))::uuid,
		       $1, 'manual', $2, $2, $3::text::ax.execution_state, 1, 0,
		       CASE WHEN $3 <> 'pending' THEN $2::timestamptz END,
		       CASE WHEN $3 NOT IN ('pending', 'running') THEN $2::timestamptz + make_interval(secs => s) END
		FROM unnest($4::float8[]) s`, job, fired, string(state), took)
	require.NoError(e.t, err)
}

// addPending adds n pending tasks of job at priority in class ("": none).
func (e *planEnv) addPending(job uuid.UUID, n, priority int, class string) {
	e.t.Helper()
	_, err := e.conn.Exec(context.Background(), `
		WITH e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		    SELECT ax.uuid_v7(), $1, 'manual', now(), 1, $3 FROM generate_series(1, $2) RETURNING id, job_id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds, rate_class)
		SELECT id, job_id, 0, 1, $3, 1, 60, nullif($4, '') FROM e`, job, n, priority, class)
	require.NoError(e.t, err)
}

func ones(n int, v float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// TestOverviewAggregates: the home page's numbers, from the database's
// aggregates over a known set of runs: runs per minute and state in the
// last 24 hours only (a run a day and an hour old and one not fired yet
// are left out), the p50 and p95 of each job's run times per hour
// (percentile_disc: values that occurred), the busiest jobs first, the
// pending tasks by class and priority, and all of it limited to a key's
// groups.
func TestOverviewAggregates(t *testing.T) {
	t.Parallel()
	e := newPlanEnv(t)
	ctx := context.Background()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	report, sync := e.overviewJob("billing", "report"), e.overviewJob("ops", "sync")
	e.addRuns(report, now.Add(-10*time.Minute), axtype.ExecutionSucceeded, 1, 1, 1)
	e.addRuns(report, now.Add(-10*time.Minute+20*time.Second), axtype.ExecutionFailed, 2)
	var oneTo20 []float64
	for i := 1; i <= 20; i++ {
		oneTo20 = append(oneTo20, float64(i))
	}
	e.addRuns(report, now.Add(-150*time.Minute), axtype.ExecutionSucceeded, oneTo20...)
	e.addRuns(report, now.Add(-25*time.Hour), axtype.ExecutionSucceeded, ones(5, 3)...) // before the window
	e.addRuns(sync, now.Add(-3*time.Minute), axtype.ExecutionTimedOut, ones(4, 60)...)
	e.addRuns(sync, now.Add(-3*time.Minute), axtype.ExecutionRunning, 0, 0)
	e.addRuns(sync, now.Add(5*time.Minute), axtype.ExecutionPending, 0) // after it
	_, err := e.conn.Exec(ctx, `INSERT INTO ax.rate_class (name, rate, burst, tokens) VALUES ('db', 1, 1, 1)`)
	require.NoError(t, err)
	e.addPending(report, 3, 5, "")
	e.addPending(sync, 2, 0, "db")
	e.addPending(sync, 1, 7, "db")

	o, err := db.Overview(ctx, e.conn, db.OverviewParams{Now: &now, MaxJobs: 8, MaxRows: 50})
	require.NoError(t, err)
	at := func(d time.Duration) time.Time { return now.Add(d) }
	require.Equal(t, []axtype.RunsInMinute{
		{Minute: at(-150 * time.Minute), State: axtype.ExecutionSucceeded, Runs: 20},
		{Minute: at(-10 * time.Minute), State: axtype.ExecutionFailed, Runs: 1},
		{Minute: at(-10 * time.Minute), State: axtype.ExecutionSucceeded, Runs: 3},
		{Minute: at(-3 * time.Minute), State: axtype.ExecutionRunning, Runs: 2},
		{Minute: at(-3 * time.Minute), State: axtype.ExecutionTimedOut, Runs: 4},
	}, utcRuns(o.Runs))
	require.Equal(t, []axtype.JobDurations{
		{JobID: report, Group: "billing", Name: "report", Hour: at(-3 * time.Hour), Runs: 20, P50: 10 * time.Second, P95: 19 * time.Second},
		{JobID: report, Group: "billing", Name: "report", Hour: at(-time.Hour), Runs: 4, P50: time.Second, P95: 2 * time.Second},
		{JobID: sync, Group: "ops", Name: "sync", Hour: at(-time.Hour), Runs: 4, P50: time.Minute, P95: time.Minute},
	}, utcDurations(o.Durations))
	require.Equal(t, []axtype.QueueDepth{
		{Class: "", Priority: 5, Tasks: 3}, {Class: "db", Priority: 7, Tasks: 1}, {Class: "db", Priority: 0, Tasks: 2},
	}, o.Queue)

	// The busiest job alone, and a key limited to the group ops.
	o, err = db.Overview(ctx, e.conn, db.OverviewParams{Now: &now, MaxJobs: 1, MaxRows: 50})
	require.NoError(t, err)
	require.Len(t, o.Durations, 2)
	require.Equal(t, "report", o.Durations[0].Name)
	o, err = db.Overview(ctx, e.conn, db.OverviewParams{Now: &now, Groups: []string{"ops"}, MaxJobs: 8, MaxRows: 50})
	require.NoError(t, err)
	require.Equal(t, []axtype.RunsInMinute{
		{Minute: at(-3 * time.Minute), State: axtype.ExecutionRunning, Runs: 2},
		{Minute: at(-3 * time.Minute), State: axtype.ExecutionTimedOut, Runs: 4},
	}, utcRuns(o.Runs))
	require.Len(t, o.Durations, 1)
	require.Equal(t, "sync", o.Durations[0].Name)
	require.Equal(t, []axtype.QueueDepth{{Class: "db", Priority: 7, Tasks: 1}, {Class: "db", Priority: 0, Tasks: 2}}, o.Queue)
}

func utcRuns(in []axtype.RunsInMinute) []axtype.RunsInMinute {
	for i := range in {
		in[i].Minute = in[i].Minute.UTC()
	}
	return in
}

func utcDurations(in []axtype.JobDurations) []axtype.JobDurations {
	for i := range in {
		in[i].Hour = in[i].Hour.UTC()
	}
	return in
}

// TestOverviewPlanBounded: with a million runs older than the window and
// a few hundred in it, the home page's queries find the window's runs
// through the runs' id index (UUIDv7: time-ordered), not by reading the
// table: auto_explain's plans of db.Overview have no sequential scan of
// ax.execution, and they read about as many rows as the window holds.
func TestOverviewPlanBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts a million runs")
	}
	t.Parallel()
	e := newPlanEnv(t)
	ctx := context.Background()
	job := e.overviewJob("billing", "report")
	start := time.Now()
	_, err := e.conn.Exec(ctx, `
		INSERT INTO ax.execution (id, job_id, cause, scheduled_for, fired_at, state, shard_count, priority, started_at, finished_at)
		SELECT (lpad(to_hex(floor(extract(epoch FROM f) * 1000)::bigint), 12, '0')
		        || substr(md5(i::text), 13, 20))::uuid,
		       $1, 'manual', f, f, 'succeeded', 1, 0, f, f + interval '2 seconds'
		FROM generate_series(1, 1000000) i,
		     LATERAL (SELECT now() - interval '2 days' - i * interval '2 seconds' AS f) t`, job)
	require.NoError(t, err)
	t.Logf("inserted a million old runs in %s", time.Since(start).Round(time.Millisecond))
	now := time.Now()
	for i := range 300 {
		state := []axtype.ExecutionState{axtype.ExecutionSucceeded, axtype.ExecutionFailed, axtype.ExecutionTimedOut}[i%3]
		e.addRuns(job, now.Add(-time.Duration(i)*time.Minute), state, float64(i%7))
	}
	_, err = e.conn.Exec(ctx, "ANALYZE ax.execution")
	require.NoError(t, err)

	e.explainPlans(e.conn)
	start = time.Now()
	o, err := db.Overview(ctx, e.conn, db.OverviewParams{MaxJobs: 8, MaxRows: 50})
	took := time.Since(start)
	require.NoError(t, err)
	var runs int64
	for _, r := range o.Runs {
		runs += r.Runs
	}
	require.EqualValues(t, 300, runs, "the window's runs, not the old ones")
	plans := e.plans()
	require.NotEmpty(t, plans, "auto_explain's plans")
	seq := regexp.MustCompile(`Seq Scan on execution\b`)
	read := regexp.MustCompile(`Index (?:Only )?Scan (?:Backward )?using execution_pkey on execution\s+\(cost=[^)]*\) \(actual rows=(\d+)`)
	scans := 0
	for _, plan := range plans {
		if !strings.Contains(plan, "all_executions") && !strings.Contains(plan, "execution") {
			continue
		}
		require.False(t, seq.MatchString(plan), "a sequential scan of ax.execution:\n%s", plan)
		for _, m := range read.FindAllStringSubmatch(plan, -1) {
			scans++
			require.LessOrEqual(t, len(m[1]), 3, "at most a few hundred rows read from ax.execution:\n%s", plan)
		}
	}
	require.Equal(t, 2, scans, "the runs and the durations each read ax.execution by its primary key")
	t.Logf("db.Overview over a million runs took %s; plans:\n%s", took.Round(time.Millisecond), strings.Join(plans, "\n\n"))
}

// TestOverviewQueueDepthReadsThroughIndexes: the queue depth counts the
// pending tasks, parked ones (no agent) and ones held below their class's
// floor with them, through the partial indexes that hold them, not by
// reading every task: here 30,000 running tasks and 200 pending, half
// parked and a quarter held. With one query of state 'pending' it read
// the whole table once migration 00076 left parked tasks out of
// task_pending_age_idx.
func TestOverviewQueueDepthReadsThroughIndexes(t *testing.T) {
	t.Parallel()
	e := newPlanEnv(t)
	ctx := context.Background()
	job := e.overviewJob("billing", "depth")
	_, err := e.conn.Exec(ctx, `
		WITH x AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority, state, started_at)
		    SELECT ax.uuid_v7(), $1, 'manual', now(), 10000, 0, 'running', now() FROM generate_series(1, 3)
		    RETURNING id, job_id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     state, lease_token, lease_expires_at, leased_at, started_at)
		SELECT id, job_id, i, 10000, 0, 1, 60, 'running', gen_random_uuid(), now() + interval '1 minute', now(), now()
		FROM x, generate_series(0, 9999) i`, job)
	require.NoError(t, err)
	e.addPending(job, 200, 3, "")
	_, err = e.conn.Exec(ctx, `UPDATE ax.task SET no_agent = true
		WHERE id IN (SELECT id FROM ax.task WHERE state = 'pending' LIMIT 100)`)
	require.NoError(t, err)
	_, err = e.conn.Exec(ctx, `UPDATE ax.task SET floor_held = true
		WHERE id IN (SELECT id FROM ax.task WHERE state = 'pending' AND NOT no_agent LIMIT 50)`)
	require.NoError(t, err)
	_, err = e.conn.Exec(ctx, "ANALYZE ax.task")
	require.NoError(t, err)

	e.explainPlans(e.conn)
	o, err := db.Overview(ctx, e.conn, db.OverviewParams{MaxJobs: 8, MaxRows: 50})
	require.NoError(t, err)
	var depth int64
	for _, d := range o.Queue {
		depth += d.Tasks
	}
	require.EqualValues(t, 200, depth, "pending tasks, parked and held ones too")
	found := false
	for _, plan := range e.plans() {
		if !strings.Contains(plan, "OverviewQueueDepth") {
			continue
		}
		found = true
		require.NotContains(t, plan, "Seq Scan on task ", "the queue depth reads every task:\n%s", plan)
	}
	require.True(t, found, "auto_explain's plan of OverviewQueueDepth")
}
