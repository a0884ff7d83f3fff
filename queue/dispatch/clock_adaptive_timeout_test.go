package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// An adaptive job's tasks get 3 × the P95 of its recent successful
// attempts, at least 5 s, at most timeout_seconds (the start value
// without history); what axtype.Job.AdaptiveTimeout shows of the stored measure
// is what the fire gave the task.
func TestAdaptiveTimeoutFollowsHistory(t *testing.T) {
	t.Parallel()
	secs := func(s ...float64) []time.Duration {
		out := make([]time.Duration, len(s))
		for i, v := range s {
			out[i] = time.Duration(v * float64(time.Second))
		}
		return out
	}
	steps := func(n int, d time.Duration) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = time.Duration(i+1) * d
		}
		return out
	}
	same := func(n int, d time.Duration) []time.Duration {
		out := make([]time.Duration, n)
		for i := range out {
			out[i] = d
		}
		return out
	}
	for _, c := range []struct {
		name    string
		history func(e *clockEnv, job uuid.UUID)
		want    int
		basis   axtype.TimeoutBasis
		samples int
	}{{
		name:    "no history: the ceiling",
		history: func(*clockEnv, uuid.UUID) {},
		want:    120, basis: axtype.TimeoutBasisNoHistory,
	}, {
		// 1 s … 20 s: the nearest-rank P95 of 20 is the 19th, 19 s.
		name: "3 × P95",
		history: func(e *clockEnv, job uuid.UUID) {
			e.history(job, time.Hour, axtype.ExecutionSucceeded, steps(20, time.Second)...)
			// Failures and timeouts, however long, are not measured.
			e.history(job, time.Minute, axtype.ExecutionFailed, secs(500, 500)...)
			e.history(job, time.Minute, axtype.ExecutionTimedOut, secs(119)...)
		},
		want: 57, basis: axtype.TimeoutBasisP95, samples: 20,
	}, {
		name: "rounded up to whole seconds",
		history: func(e *clockEnv, job uuid.UUID) {
			e.history(job, time.Minute, axtype.ExecutionSucceeded, secs(3.9, 0.2, 1)...) // 3 × 3.9 s = 11.7 s
		},
		want: 12, basis: axtype.TimeoutBasisP95, samples: 3,
	}, {
		name: "at least 5 s",
		history: func(e *clockEnv, job uuid.UUID) {
			e.history(job, time.Minute, axtype.ExecutionSucceeded, same(30, time.Second)...)
		},
		want: 5, basis: axtype.TimeoutBasisFloor, samples: 30,
	}, {
		name: "at most timeout_seconds",
		history: func(e *clockEnv, job uuid.UUID) {
			e.history(job, time.Minute, axtype.ExecutionSucceeded, same(10, time.Minute)...)
		},
		want: 120, basis: axtype.TimeoutBasisCeiling, samples: 10,
	}, {
		// 50 slow successes, then 100 of 2 s: only the latest 100 count.
		name: "the last 100 successes",
		history: func(e *clockEnv, job uuid.UUID) {
			e.history(job, 2*time.Hour, axtype.ExecutionSucceeded, same(50, 100*time.Second)...)
			e.history(job, time.Hour, axtype.ExecutionSucceeded, same(100, 2*time.Second)...)
		},
		want: 6, basis: axtype.TimeoutBasisP95, samples: 100,
	}, {
		name: "none older than 24 h",
		history: func(e *clockEnv, job uuid.UUID) {
			e.history(job, 25*time.Hour, axtype.ExecutionSucceeded, same(10, 30*time.Second)...)
			e.history(job, 23*time.Hour, axtype.ExecutionSucceeded, secs(4)...)
		},
		want: 12, basis: axtype.TimeoutBasisP95, samples: 1,
	}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setupClock(t)
			job := e.adaptiveJob(120, 1)
			c.history(e, job.ID)
			task := e.fire(job)
			require.Equal(t, c.want, task.TimeoutSeconds, "the fire's timeout")

			shown, err := db.JobGetByID(context.Background(), e.pool, job.ID)
			require.NoError(t, err)
			require.NotNil(t, shown.TimeoutMeasure, "the fire stored its measure")
			require.Equal(t, c.samples, shown.TimeoutMeasure.Samples)
			got, basis := shown.AdaptiveTimeout()
			require.Equal(t, c.want, got, "the rule in Go agrees with the fire")
			require.Equal(t, c.basis, basis)
		})
	}
}

// A fire measures a job's history at most once a minute: a fire soon
// after reuses the stored measure, one after it has aged measures again.
// A fixed job's fire measures nothing.
func TestAdaptiveTimeoutMeasureIsCached(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	job := e.adaptiveJob(600, 1)
	e.history(job.ID, time.Hour, axtype.ExecutionSucceeded, 10*time.Second)
	require.Equal(t, 30, e.fire(job).TimeoutSeconds)

	e.history(job.ID, time.Minute, axtype.ExecutionSucceeded, 100*time.Second, 100*time.Second)
	require.Equal(t, 30, e.fire(job).TimeoutSeconds, "within a minute of the measure: the stored one")

	_, err := e.pool.Exec(ctx, `UPDATE ax.job_timeout_measure SET computed_at = computed_at - interval '61 seconds' WHERE job_id = $1`, job.ID)
	require.NoError(t, err)
	require.Equal(t, 300, e.fire(job).TimeoutSeconds, "a minute later: measured again")

	fixed := e.job(1, 0)
	e.history(fixed.ID, time.Minute, axtype.ExecutionSucceeded, time.Second)
	require.Equal(t, 3600, e.fire(fixed).TimeoutSeconds, "a fixed job gets timeout_seconds")
	var measures int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.job_timeout_measure WHERE job_id = $1`, fixed.ID).Scan(&measures))
	require.Zero(t, measures, "and its history is not read")
}

// After an attempt of an adaptive job times out, its retry gets twice the
// timeout of the attempt before it, up to timeout_seconds, whether the
// reaper timed it out or the agent reported it.
func TestAdaptiveTimeoutDoublesAfterTimeout(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	job := e.adaptiveJob(40, 5)
	e.history(job.ID, time.Minute, axtype.ExecutionSucceeded, 3*time.Second) // 3 × 3 s = 9 s
	task := e.fire(job)
	require.Equal(t, 9, task.TimeoutSeconds)
	a := e.agent("a1")

	// Attempts 1 and 2 overrun, their agent never reports, and the reaper
	// times them out past their timeout and the agents' grace (their 30 s
	// leases have not run out).
	for _, c := range []struct{ timeout, next int }{{9, 18}, {18, 36}} {
		leased := e.lease(a)
		require.Len(t, leased, 1)
		require.Equal(t, c.timeout, leased[0].TimeoutSeconds, "the agent is told the attempt's timeout")
		e.clock.Advance(time.Duration(c.timeout)*time.Second + dispatch.DefaultTimeoutGrace + time.Second)
		e.sweep()
		state, _ := e.task(task.ID)
		require.Equal(t, "pending", state)
		require.Equal(t, c.next, e.taskTimeout(task.ID), "the retry of an attempt timed out after %d s", c.timeout)
		e.heartbeat(a)
	}
	// Attempt 3 is timed out by its agent: 72 s, capped at 40.
	leased := e.lease(a)
	require.Len(t, leased, 1)
	require.Equal(t, 36, leased[0].TimeoutSeconds)
	done, err := e.broker.Complete(context.Background(), a.ID, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}, State: axtype.TaskTimedOut, Error: "timed out after 36 s"}})
	require.NoError(t, err)
	require.Len(t, done, 1)
	require.Equal(t, axtype.TaskPending, done[0].State)
	require.Equal(t, 40, e.taskTimeout(task.ID), "doubled, capped at timeout_seconds")
	leased = e.lease(a)
	require.Len(t, leased, 1)
	require.Equal(t, 4, leased[0].Attempt)
	require.Equal(t, 40, leased[0].TimeoutSeconds)

	// The task's events say why each retry got its timeout.
	var retries []string
	rows, err := e.pool.Query(context.Background(), `SELECT message FROM ax.task_event
		WHERE task_id = $1 AND kind = 'state' AND state = 'pending' ORDER BY id`, task.ID)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var m string
		require.NoError(t, rows.Scan(&m))
		retries = append(retries, m)
	}
	require.NoError(t, rows.Err())
	require.Len(t, retries, 3)
	require.Equal(t, "timed out after 9 s; the retry gets twice the timeout (at most timeout_seconds): 18 s", retries[0])
	require.Equal(t, "timed out after 18 s; the retry gets twice the timeout (at most timeout_seconds): 36 s", retries[1])
	require.Regexp(t, `^retry after backoff, not before \S+, with twice the timeout \(at most timeout_seconds\): 40 s$`, retries[2])
	// Each attempt's own end is recorded the same way whether the reaper
	// timed it out or its agent did.
	type ended struct {
		Attempt        int
		State, Message string
	}
	rows, err = e.pool.Query(context.Background(), `SELECT attempt, state::text, message FROM ax.all_task_events
		WHERE task_id = $1 AND kind = 'state' AND state IN ('timed_out', 'failed', 'succeeded') ORDER BY id`, task.ID)
	require.NoError(t, err)
	ends, err := pgx.CollectRows(rows, pgx.RowToStructByPos[ended])
	require.NoError(t, err)
	require.Equal(t, []ended{{1, "timed_out", "timed out after 9 s"}, {2, "timed_out", "timed out after 18 s"},
		{3, "timed_out", "timed out after 36 s"}}, ends)
}

// A lost lease is no timeout: the retry keeps the attempt's timeout. A
// failure neither. A fixed job's retry after a timeout keeps
// timeout_seconds.
func TestAdaptiveTimeoutKeptWithoutTimeout(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	job := e.adaptiveJob(3600, 3)
	e.history(job.ID, time.Minute, axtype.ExecutionSucceeded, 20*time.Second) // 60 s
	task := e.fire(job)
	a := e.agent("a1")
	require.Len(t, e.lease(a), 1)
	e.clock.Advance(e.cfg.Lease + time.Second) // silent past its lease, within its 60 s
	e.sweep()
	state, attempt := e.task(task.ID)
	require.Equal(t, "pending", state)
	require.Equal(t, 1, attempt, "a lost lease runs the same attempt again")
	require.Equal(t, 60, e.taskTimeout(task.ID), "a lost lease keeps the timeout")

	e.heartbeat(a)
	leased := e.lease(a)
	require.Len(t, leased, 1)
	_, err := e.broker.Complete(context.Background(), a.ID, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}, State: axtype.TaskFailed, Error: "exit 1"}})
	require.NoError(t, err)
	require.Equal(t, 60, e.taskTimeout(task.ID), "a failure keeps the timeout")

	fixed := e.create(jobDef("fixed", axtype.TimeoutFixed, 9, 2))
	fixedTask := e.fire(fixed)
	b := e.agent("b1")
	leased = e.lease(b) // and the adaptive task's attempt 3, whose 60 s run on
	require.Len(t, leased, 2)
	e.clock.Advance(9*time.Second + dispatch.DefaultTimeoutGrace + time.Second)
	e.sweep()
	state, attempt = e.task(fixedTask.ID)
	require.Equal(t, "pending", state)
	require.Equal(t, 2, attempt)
	require.Equal(t, 9, e.taskTimeout(fixedTask.ID), "a fixed job keeps timeout_seconds")
}

// jobDef makes a job a manual shell job of one shard with timeout mode
// and timeoutSeconds that may run attempts times, without backoff.
func jobDef(name string, mode axtype.TimeoutMode, timeoutSeconds, attempts int) func(j *axtype.Job) {
	return func(j *axtype.Job) {
		j.Name = name + "-" + uuid.NewString()[:8]
		j.TimeoutSeconds, j.TimeoutMode, j.RetryMaxAttempts = timeoutSeconds, mode, attempts
	}
}

// adaptiveJob creates an adaptive job with ceiling timeoutSeconds.
func (e *clockEnv) adaptiveJob(timeoutSeconds, attempts int) *axtype.Job {
	e.t.Helper()
	return e.create(jobDef("adaptive", axtype.TimeoutAdaptive, timeoutSeconds, attempts))
}

// history records ended runs of job of one task each, which ended ago
// (by the database clock) in state after running for durations, oldest
// first.
func (e *clockEnv) history(job uuid.UUID, ago time.Duration, state axtype.ExecutionState, durations ...time.Duration) {
	e.t.Helper()
	dbtest.EndedRuns(e.t, e.pool, job, ago, string(state), durations...)
}

// taskTimeout reads the timeout of a task's current attempt.
func (e *clockEnv) taskTimeout(id uuid.UUID) int {
	e.t.Helper()
	var secs int
	require.NoError(e.t, e.pool.QueryRow(context.Background(),
		"SELECT timeout_seconds FROM ax.all_tasks WHERE id = $1", id).Scan(&secs))
	return secs
}

// One fire measures at most axtype.AdaptiveTimeoutMeasuresPerFire histories,
// jobs never measured first: the others start at their ceiling and are
// measured by a later fire.
func TestAdaptiveTimeoutMeasuresBoundedPerFire(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	ctx := context.Background()
	n := axtype.AdaptiveTimeoutMeasuresPerFire + 5
	jobs := make([]*axtype.Job, n)
	for i := range jobs {
		jobs[i] = e.adaptiveJob(600, 1)
		e.history(jobs[i].ID, time.Minute, axtype.ExecutionSucceeded, 10*time.Second) // 30 s
	}
	fireAll := func() map[int]int {
		execs := make([]*axtype.NewExecution, n)
		for i, j := range jobs {
			execs[i] = &axtype.NewExecution{ID: uuid.Must(uuid.NewV7()), JobID: j.ID, Cause: axtype.CauseManual, ScheduledFor: time.Now()}
		}
		tx, err := e.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = dispatch.InsertExecutions(ctx, tx, nil, nil, execs, nil)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		ids := make([]uuid.UUID, n)
		for i, x := range execs {
			ids[i] = x.ID
		}
		timeouts := map[int]int{}
		rows, err := e.pool.Query(ctx, `SELECT timeout_seconds FROM ax.all_tasks WHERE execution_id = ANY($1)`, ids)
		require.NoError(t, err)
		defer rows.Close()
		for rows.Next() {
			var secs int
			require.NoError(t, rows.Scan(&secs))
			timeouts[secs]++
		}
		require.NoError(t, rows.Err())
		return timeouts
	}
	require.Equal(t, map[int]int{30: axtype.AdaptiveTimeoutMeasuresPerFire, 600: 5}, fireAll(), "the first fire measures 20")
	require.Equal(t, map[int]int{30: n}, fireAll(), "the next measures the 5 never measured and keeps the rest")
	var measured int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.job_timeout_measure WHERE samples = 1`).Scan(&measured))
	require.Equal(t, n, measured)
}
