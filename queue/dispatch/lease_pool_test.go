package dispatch_test

import (
	"context"
	"errors"
	"math"
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

// TestABusyPoolStaysOutOfOtherPoolsLeases: a pool=gpu job fired with
// 20,000 shards while its two live agents are busy (registered,
// heartbeating, not polling), plus 1,000 keyed shards of another gpu job, all waiting an
// hour, a quarter of them unassigned. Another agent's lease reads a few
// task rows to find its own task, and so does its idle long poll's check:
// before migration 00079 the lease read 40,003 (the starved and
// stealable groups walk every pending task oldest first and drop them on
// their job's labels) and the check 40,000. The gpu agents still lease
// them; when the job's labels change, its pending tasks follow it to the
// new pool and that pool's agent leases them.
func TestABusyPoolStaysOutOfOtherPoolsLeases(t *testing.T) {
	e := setup(t, nil)
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{Refresh: time.Nanosecond}, nil, nil)
	require.NoError(t, err)
	e.router = router
	ctx := context.Background()
	other := e.agent(nil, nil)
	gpuAgent := e.agent(map[string]string{"pool": "gpu"}, nil)
	gpuAgent2 := e.agent(map[string]string{"pool": "gpu"}, nil)
	ready := true
	heartbeat := func(agents ...*axtype.Agent) {
		for _, a := range agents {
			_, err := e.broker.Heartbeat(ctx, a.ID, nil, &axtype.AgentLoad{Ready: &ready})
			require.NoError(t, err)
		}
	}

	gpu := e.job(func(j *axtype.Job) {
		j.TargetLabels, j.ShardCount, j.Priority = map[string]string{"pool": "gpu"}, 10_000, 9
	})
	heartbeat(gpuAgent, gpuAgent2)
	e.trigger(gpu.ID)
	heartbeat(gpuAgent, gpuAgent2)
	e.trigger(gpu.ID)
	keyed := e.job(func(j *axtype.Job) {
		j.TargetLabels, j.ShardCount, j.Priority = map[string]string{"pool": "gpu"}, 1_000, 9
		j.ConcurrencyKey, j.ConcurrencyLimit = "shard-{{.shard.index}}", 1
	})
	heartbeat(gpuAgent, gpuAgent2)
	e.trigger(keyed.ID)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET not_before = not_before - interval '1 hour',
		preferred_agent_id = CASE WHEN shard_index % 4 = 0 THEN NULL ELSE preferred_agent_id END
		WHERE job_id IN ($1, $2)`, gpu.ID, keyed.ID)
	require.NoError(t, err)
	var waiting, parked, routed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE no_agent OR key_parked),
		count(*) FILTER (WHERE preferred_agent_id IN ($3, $4))
		FROM ax.task WHERE job_id IN ($1, $2) AND state = 'pending'`, gpu.ID, keyed.ID, gpuAgent.ID, gpuAgent2.ID).
		Scan(&waiting, &parked, &routed))
	require.Equal(t, 21_000, waiting)
	require.Zero(t, parked, "a live agent can take them, and each key has room")
	require.Equal(t, 15_750, routed, "routed to the gpu agents but for the quarter made unassigned")

	heartbeat(other)
	mine := e.job(nil)
	run := e.trigger(mine.ID)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read only what the lease read; its changes go
	read := func() int64 { return taskRowsRead(t, tx) }
	before := read()
	got, err := dispatch.Lease(ctx, tx, &dispatch.LeaseParams{AgentID: other.ID, AgentExecutors: []string{"shell"},
		Max: 10, Lease: 30 * time.Second, StealAfter: 2 * time.Second, StarveAfter: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, run.ID, got[0].ExecutionID)
	require.Less(t, read()-before, int64(100), "task rows the lease read")
	checkReads(t, tx, other.ID, func(next time.Duration) {
		require.Equal(t, time.Hour, next, "nothing the agent could lease")
	})
	require.NoError(t, tx.Rollback(ctx))

	leased := e.lease(gpuAgent, 5)
	require.Len(t, leased, 5)
	for _, lt := range leased {
		require.Contains(t, []uuid.UUID{gpu.ID, keyed.ID}, lt.JobID)
	}

	// The job moves to another pool, and its pending tasks with it.
	tpuAgent := e.agent(map[string]string{"pool": "tpu"}, nil)
	_, err = e.pool.Exec(ctx, `UPDATE ax.job SET target_labels = '{"pool": "tpu"}' WHERE id = $1`, gpu.ID)
	require.NoError(t, err)
	var stale int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.task t JOIN ax.job j ON j.id = t.job_id
		WHERE t.job_id = $1 AND t.state = 'pending' AND t.pool_id <> j.pool_id`, gpu.ID).Scan(&stale))
	require.Zero(t, stale, "pending tasks follow their job's pool")
	leased = e.lease(tpuAgent, 5)
	require.Len(t, leased, 5, "stolen from the gpu agent they were routed to, or unassigned")
	for _, lt := range leased {
		require.Equal(t, gpu.ID, lt.JobID)
	}
}

// TestADryRateClassStaysOutOfOtherLeases: 20,000 high-priority tasks of a
// rate class out of tokens (one a thousand seconds), waiting an hour
// among everyone's untargeted tasks. Another job's lease reads a few task
// rows to find its task: before migration 00081 the class's tasks were in
// the pool of their labels, and the lease read every one of them (the
// starved group, oldest first) and dropped it, as the class had granted
// it nothing. Then its idle long poll's check reads a few rows to say
// "in 1,000 s, the class's next token": before it read 40,000 (the
// class's pool whole, for the earliest task of each kind). Once the class
// has a token, its task is leased (first: it has waited longest), and
// the other job's after.
func TestADryRateClassStaysOutOfOtherLeases(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	other := e.agent(nil, nil)
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "slow", Rate: 0.001, Burst: 1})
	require.NoError(t, err)
	slow := e.job(func(j *axtype.Job) {
		j.ShardCount, j.Priority, j.RateLimitClass = 10_000, 9, "slow"
	})
	e.trigger(slow.ID)
	e.trigger(slow.ID)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET not_before = not_before - interval '1 hour' WHERE job_id = $1`, slow.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET tokens = 0, refilled_at = now() WHERE name = 'slow'`)
	require.NoError(t, err)
	mine := e.job(nil)
	run := e.trigger(mine.ID)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read only what the lease read; its changes go
	read := func() int64 { return taskRowsRead(t, tx) }
	before := read()
	got, err := dispatch.Lease(ctx, tx, &dispatch.LeaseParams{AgentID: other.ID, AgentExecutors: []string{"shell"},
		Max: 10, Lease: 30 * time.Second, StealAfter: 2 * time.Second, StarveAfter: time.Minute})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.Equal(t, run.ID, got[0].ExecutionID)
	require.Less(t, read()-before, int64(100), "task rows the lease read")
	checkReads(t, tx, other.ID, func(next time.Duration) {
		require.InDelta(t, 1000, next.Seconds(), 5, "until the class's next token")
	})
	require.NoError(t, tx.Rollback(ctx))

	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET tokens = 1 WHERE name = 'slow'`)
	require.NoError(t, err)
	leased := e.lease(other, 10)
	require.Len(t, leased, 1, "one of the class's tasks, for its one token")
	require.Equal(t, slow.ID, leased[0].JobID)
	leased = e.lease(other, 10)
	require.Len(t, leased, 1)
	require.Equal(t, mine.ID, leased[0].JobID)

	// Only the class's tasks wait now: the check says when its next
	// token comes, and once it has one, that they are leasable.
	tx, err = e.pool.Begin(ctx)
	require.NoError(t, err)
	checkReads(t, tx, other.ID, func(next time.Duration) {
		require.InDelta(t, 1000, next.Seconds(), 5, "until the class's next token")
	})
	_, err = tx.Exec(ctx, `UPDATE ax.rate_class SET tokens = 1 WHERE name = 'slow'`)
	require.NoError(t, err)
	checkReads(t, tx, other.ID, func(next time.Duration) {
		require.LessOrEqual(t, next, time.Duration(0), "the class has a token: its tasks are leasable now")
	})
	require.NoError(t, tx.Rollback(ctx))
}

// TestTasksFollowTheirJobsPool: when a job moves from pool=gpu to
// pool=tpu, its tasks follow it in every state (migration 00082): one
// leased on a gpu agent at the change and handed back later is leased by
// the tpu agent, and so are tasks a fire wrote in the old pool after the change
// (a fire reads the job's pool without a lock), once the reaper's sweep
// moved them. A broadcast task pinned to the gpu agent stays in its pool
// and that agent leases it, keyed or not. Before 00082 the handed-back task and
// the late fire's tasks stayed in the gpu pool, where no agent that may
// take them looks, and the keyed pinned task was read by no lease.
func TestTasksFollowTheirJobsPool(t *testing.T) {
	e := setup(t, nil)
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{Refresh: time.Nanosecond}, nil, nil)
	require.NoError(t, err)
	e.router = router
	ctx := context.Background()
	gpuAgent := e.agent(map[string]string{"pool": "gpu"}, nil)
	job := e.job(func(j *axtype.Job) { j.TargetLabels, j.ShardCount = map[string]string{"pool": "gpu"}, 2 })
	pinned := e.job(func(j *axtype.Job) {
		j.TargetLabels, j.RouteStrategy = map[string]string{"pool": "gpu"}, axtype.RouteBroadcast
		j.ConcurrencyKey, j.ConcurrencyLimit = "host-{{.shard.index}}", 1
	})
	e.trigger(job.ID)
	held := e.lease(gpuAgent, 1)
	require.Len(t, held, 1)
	require.Equal(t, job.ID, held[0].JobID)
	e.trigger(pinned.ID)

	_, err = e.pool.Exec(ctx, `UPDATE ax.job SET target_labels = '{"pool": "tpu"}' WHERE id = ANY($1)`,
		[]uuid.UUID{job.ID, pinned.ID})
	require.NoError(t, err)
	// The held task is handed back (as a draining agent does): pending
	// again.
	released, err := e.broker.Release(ctx, gpuAgent.ID, []axtype.TaskRef{{ID: held[0].ID, Token: held[0].LeaseToken}})
	require.NoError(t, err)
	require.Len(t, released, 1)
	require.Equal(t, axtype.TaskState("pending"), e.task(held[0].ID).State)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})

	// A fire that read the old pool and committed after the change.
	late := e.trigger(job.ID)
	var gpuPool int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id FROM ax.task_pool
		WHERE target_labels = '{"pool": "gpu"}' AND executor_kind = 'shell' AND rate_class IS NULL`).Scan(&gpuPool))
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET pool_id = $1 WHERE execution_id = $2`, gpuPool, late.ID)
	require.NoError(t, err)
	require.NoError(t, reaper.Sweep(ctx))

	tpuAgent := e.agent(map[string]string{"pool": "tpu"}, nil)
	got := e.lease(tpuAgent, 10)
	require.Len(t, got, 4, "the handed-back task, its sibling and the late fire's two")
	for _, lt := range got {
		require.Equal(t, job.ID, lt.JobID)
	}
	got = e.lease(gpuAgent, 10)
	require.Len(t, got, 1, "the task pinned to the gpu agent")
	require.Equal(t, pinned.ID, got[0].JobID)
}

// TestAKeysBacklogStaysOutOfOtherLeases: 20,000 runs of one concurrency
// key of limit 1, waiting an hour, one of them running on a busy agent:
// the others are parked behind the key. Another agent's lease reads a few
// task rows to find its own task, and its idle long poll's check a few
// to say it has nothing: before migration 00084 parked tasks were in
// task_pending_age_idx, and the lease read 40,000 (the starved group
// walks it oldest first and drops keyed tasks) and the check 39,998. The
// backlog still counts them, and when the running one ends, the next of
// the key is leased.
func TestAKeysBacklogStaysOutOfOtherLeases(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	other := e.agent(nil, nil)
	busy := e.agent(nil, nil)
	keyed := e.job(func(j *axtype.Job) {
		j.ShardCount, j.Priority = 10_000, 9
		j.ConcurrencyKey, j.ConcurrencyLimit = "acme", 1
	})
	e.trigger(keyed.ID)
	e.trigger(keyed.ID)
	running := e.lease(busy, 10)
	require.Len(t, running, 1, "the key's one place")
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET not_before = not_before - interval '1 hour' WHERE job_id = $1`, keyed.ID)
	require.NoError(t, err)
	var parked int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.task WHERE job_id = $1 AND key_parked`, keyed.ID).Scan(&parked))
	require.Equal(t, 19_999, parked)
	mine := e.job(nil)
	run := e.trigger(mine.ID)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read only what the lease read; its changes go
	got, reads := leaseReading(t, tx, other.ID, nil)
	require.Len(t, got, 1)
	require.Equal(t, run.ID, got[0].ExecutionID)
	require.Less(t, reads, int64(100), "task rows the lease read")
	checkReads(t, tx, other.ID, func(next time.Duration) {
		require.Equal(t, time.Hour, next, "nothing until the key frees a place (keys_freed wakes it)")
	})
	require.NoError(t, tx.Rollback(ctx))

	backlog, err := db.TaskCountBacklog(ctx, e.pool)
	require.NoError(t, err)
	var depth int64
	for _, b := range backlog {
		if b.Priority == 9 {
			depth += b.Depth
		}
	}
	require.EqualValues(t, 19_999, depth, "parked tasks are in the backlog")

	_, err = e.broker.Complete(ctx, busy.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: running[0].ID,
		Token: running[0].LeaseToken}, State: axtype.TaskSucceeded}})
	require.NoError(t, err)
	leased := e.lease(other, 10)
	require.Len(t, leased, 1)
	require.Equal(t, mine.ID, leased[0].JobID)
	// The key's freed place: a waiting poll's check sees it, and its
	// lease unparks the key's next task.
	leased, err = e.broker.Lease(ctx, other, 10, 10*time.Second)
	require.NoError(t, err)
	require.Len(t, leased, 1)
	require.Equal(t, keyed.ID, leased[0].JobID, "the key's next")

}

// leaseReading leases up to 10 tasks for agent (a shell agent without
// labels) in tx, with grants of rate class tokens, and returns them with
// the task rows the lease read.
func leaseReading(t *testing.T, tx pgx.Tx, agent uuid.UUID, grants map[string]int) ([]*axtype.LeasedTask, int64) {
	t.Helper()
	before := taskRowsRead(t, tx)
	got, err := dispatch.Lease(context.Background(), tx, &dispatch.LeaseParams{AgentID: agent,
		AgentExecutors: []string{"shell"}, Max: 10, Lease: 30 * time.Second, StealAfter: 2 * time.Second,
		StarveAfter: time.Minute, Grants: grants})
	require.NoError(t, err)
	return got, taskRowsRead(t, tx) - before
}

// checkReads runs the long poll's check for agent in tx, with Postgres's
// choice of plan and then with the generic plan the broker uses
// (db.WithBatchTxV), asserts on its answer with want, and that each read
// fewer than 100 task rows.
func checkReads(t *testing.T, tx pgx.Tx, agent uuid.UUID, want func(next time.Duration)) {
	t.Helper()
	checkReadsAtMost(t, tx, agent, 100, want)
}

// checkReadsAtMost is checkReads reading fewer than most task rows.
func checkReadsAtMost(t *testing.T, tx pgx.Tx, agent uuid.UUID, most int64, want func(next time.Duration)) {
	t.Helper()
	ctx := context.Background()
	for _, mode := range []string{"auto", "force_generic_plan"} {
		_, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, mode)
		require.NoError(t, err)
		before := taskRowsRead(t, tx)
		outlook, err := db.TaskNextLeasable(ctx, tx, []uuid.UUID{agent}, 2*time.Second, nil)
		require.NoError(t, err)
		require.Contains(t, outlook, agent)
		want(outlook[agent].Next)
		require.Less(t, taskRowsRead(t, tx)-before, most, "task rows the long poll's check read (%s)", mode)
	}
	_, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = auto`)
	require.NoError(t, err)
}

// TestARetryBacklogStaysOutOfOtherChecks: 20,000 tasks of one job wait
// to retry in ten minutes, routed to a busy agent. Another agent's idle
// check reads its pool's first 1,000 and says "in ten minutes" (its
// true answer is ten minutes and the steal delay: early, never late).
// Before, the check read 60,000 task rows, 21 ms: the "leasable now"
// part walked the whole pool (its bound was clock_timestamp(), volatile,
// so no index bound), and the min read every pending task of the pool,
// twice. A task due now is found at once.
func TestARetryBacklogStaysOutOfOtherChecks(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	other := e.agent(nil, nil)
	busy := e.agent(nil, nil)
	retrying := e.job(func(j *axtype.Job) { j.ShardCount = 10_000 })
	e.trigger(retrying.ID)
	e.trigger(retrying.ID)
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET not_before = now() + interval '10 minutes', preferred_agent_id = $2
		WHERE job_id = $1`, retrying.ID, busy.ID)
	require.NoError(t, err)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // reads only
	checkReadsAtMost(t, tx, other.ID, 1_100, func(next time.Duration) {
		require.InDelta(t, (10 * time.Minute).Seconds(), next.Seconds(), 3, "when the backlog could be stolen, or a little before")
		require.LessOrEqual(t, next, 10*time.Minute+2*time.Second, "never later than that")
	})
	require.NoError(t, tx.Rollback(ctx))

	mine := e.job(nil)
	e.trigger(mine.ID)
	tx, err = e.pool.Begin(ctx)
	require.NoError(t, err)
	checkReads(t, tx, other.ID, func(next time.Duration) {
		require.Zero(t, next, "its task is due")
	})
	require.NoError(t, tx.Rollback(ctx))
	leased := e.lease(other, 10)
	require.Len(t, leased, 1)
	require.Equal(t, mine.ID, leased[0].JobID)
}

// TestAJobsPoolChangeLooksUpPoolsPerClass: a job's 20,000 unfinished
// tasks, half of a rate class the job no longer names, follow the job
// to its new labels' pools with one pool lookup per class (migration
// 00085): 2 calls of ax.task_pool_for for the job's update (its own pool
// and the old class's), none for the reaper's catch-up after it. Before,
// each task looked its pool up: 20,001 calls in the update (350 ms) and
// 20,000 in every catch-up sweep for 30 s (135-146 ms each, in the
// reaper's transaction that expires every tenant's leases).
func TestAJobsPoolChangeLooksUpPoolsPerClass(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "slow", Rate: 1, Burst: 1})
	require.NoError(t, err)
	job := e.job(func(j *axtype.Job) { j.ShardCount, j.RateLimitClass = 10_000, "slow" })
	e.trigger(job.ID)
	_, err = e.pool.Exec(ctx, `UPDATE ax.job SET rate_limit_class = NULL WHERE id = $1`, job.ID)
	require.NoError(t, err)
	e.trigger(job.ID)

	// (Counts this backend has not reported yet, read before and after:
	// they may hold earlier transactions' too.)
	lookups := func(tx pgx.Tx) int64 {
		var n int64
		require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(sum(calls), 0) FROM pg_stat_xact_user_functions
			WHERE schemaname = 'ax' AND funcname = 'task_pool_for'`).Scan(&n))
		return n
	}
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	_, err = tx.Exec(ctx, `SET LOCAL track_functions = 'all'`)
	require.NoError(t, err)
	before := lookups(tx)
	_, err = tx.Exec(ctx, `UPDATE ax.job SET target_labels = '{"pool": "tpu"}' WHERE id = $1`, job.ID)
	require.NoError(t, err)
	require.EqualValues(t, 2, lookups(tx)-before, "the job's pool, and the old class's")
	require.NoError(t, tx.Commit(ctx))

	var stale, classed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE p.target_labels <> '{"pool": "tpu"}'
		OR p.rate_class IS DISTINCT FROM t.rate_class), count(*) FILTER (WHERE t.rate_class = 'slow')
		FROM ax.task t JOIN ax.task_pool p ON p.id = t.pool_id WHERE t.job_id = $1`, job.ID).Scan(&stale, &classed))
	require.Zero(t, stale, "every task in the pool of the job's labels and its own class")
	require.Equal(t, 10_000, classed)

	tx, err = e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	_, err = tx.Exec(ctx, `SET LOCAL track_functions = 'all'`)
	require.NoError(t, err)
	before = lookups(tx)
	moved, err := db.TaskPoolCatchUp(ctx, tx)
	require.NoError(t, err)
	require.Zero(t, moved)
	require.EqualValues(t, 1, lookups(tx)-before, "the old class's pool, once")
	require.NoError(t, tx.Commit(ctx))
}

// TestAPoolCatchUpBacksOff: a job with 20,000 unfinished tasks moves to
// new labels. The reaper's catch-up reads its tasks at once, and then
// at intervals that double from the change (migration 00089): a sweep
// a moment later reads none of them, one 10 s after the change reads
// them and is next due 10 s later, and a fire that raced the change is
// caught up at the next pass. The last pass, past the window, forgets
// the change. Before, every sweep for 30 s read all 20,000 (33-39 ms
// each, in the reaper's transaction that expires every tenant's leases).
func TestAPoolCatchUpBacksOff(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.TargetLabels, j.ShardCount = map[string]string{"pool": "gpu"}, 10_000 })
	e.trigger(job.ID)
	e.trigger(job.ID)
	_, err := e.pool.Exec(ctx, `UPDATE ax.job SET target_labels = '{"pool": "tpu"}' WHERE id = $1`, job.ID)
	require.NoError(t, err)

	// pass runs the catch-up as the reaper does, and returns what it moved
	// and how many task rows it read, and when the change is due next
	// (false: forgotten).
	pass := func() (moved int, reads int64, next time.Duration, kept bool) {
		t.Helper()
		tx, err := e.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // committed below
		before := taskRowsRead(t, tx)
		moved, err = db.TaskPoolCatchUp(ctx, tx)
		require.NoError(t, err)
		reads = taskRowsRead(t, tx) - before
		var secs float64
		err = tx.QueryRow(ctx, `SELECT extract(epoch FROM next_at - now()) FROM ax.job_pool_change WHERE job_id = $1`,
			job.ID).Scan(&secs)
		if !errors.Is(err, pgx.ErrNoRows) {
			require.NoError(t, err)
			kept = true
		}
		require.NoError(t, tx.Commit(ctx))
		return moved, reads, time.Duration(secs * float64(time.Second)), kept
	}
	// since makes the change as if it had been d ago, and due now.
	since := func(d time.Duration) {
		t.Helper()
		_, err := e.pool.Exec(ctx, `UPDATE ax.job_pool_change SET changed_at = now() - $2::interval, next_at = now()
			WHERE job_id = $1`, job.ID, d)
		require.NoError(t, err)
	}

	moved, reads, next, kept := pass()
	require.Zero(t, moved, "the change's own update moved them")
	require.GreaterOrEqual(t, reads, int64(20_000), "the first pass reads the job's tasks")
	require.True(t, kept)
	require.InDelta(t, 1, next.Seconds(), 0.5, "next due a second on")

	_, reads, _, kept = pass()
	require.Less(t, reads, int64(100), "a sweep a moment later reads none of them")
	require.True(t, kept)

	// A fire that read the old pool and committed after the change.
	late := e.trigger(job.ID)
	var gpuPool int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id FROM ax.task_pool
		WHERE target_labels = '{"pool": "gpu"}' AND executor_kind = 'shell' AND rate_class IS NULL`).Scan(&gpuPool))
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET pool_id = $1 WHERE execution_id = $2`, gpuPool, late.ID)
	require.NoError(t, err)
	since(10 * time.Second)
	moved, _, next, kept = pass()
	require.Equal(t, 10_000, moved, "the late fire's tasks, at the next pass")
	require.True(t, kept)
	require.InDelta(t, 10, next.Seconds(), 0.5, "next due as long again as the change is old")
	_, reads, _, _ = pass()
	require.Less(t, reads, int64(100))

	since(db.PoolCatchUpWindow + time.Second)
	_, reads, _, kept = pass()
	require.GreaterOrEqual(t, reads, int64(30_000), "a last pass past the window")
	require.False(t, kept, "then the change is forgotten")
}

// TestADryClassPoolAnswersForEveryAgentOfItsLabels: a dry class's pool
// {pool: gpu} whose oldest tasks are those of a job that has since moved
// to {pool: gpu, zone: a} (a fire that raced the move left them there,
// until the reaper's catch-up). A {pool: gpu} agent's check says "at the
// class's next token" (another job's tasks there are its to lease then).
// When the pool's answer carried the first task's job's labels, the
// agent was told nothing: an hour.
func TestADryClassPoolAnswersForEveryAgentOfItsLabels(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "slow", Rate: 0.01, Burst: 1})
	require.NoError(t, err)
	gpu := map[string]string{"pool": "gpu"}
	agent := e.agent(gpu, nil)
	moved := e.job(func(j *axtype.Job) { j.TargetLabels, j.RateLimitClass = gpu, "slow" })
	stays := e.job(func(j *axtype.Job) { j.TargetLabels, j.RateLimitClass = gpu, "slow" })
	e.trigger(moved.ID)
	e.trigger(stays.ID)
	var pool int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT pool_id FROM ax.job WHERE id = $1`, moved.ID).Scan(&pool))
	_, err = e.pool.Exec(ctx, `UPDATE ax.job SET target_labels = '{"pool": "gpu", "zone": "a"}' WHERE id = $1`, moved.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET pool_id = $2, not_before = not_before - interval '1 minute'
		WHERE job_id = $1`, moved.ID, pool)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET not_before = not_before - interval '30 seconds' WHERE job_id = $1`, stays.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET tokens = 0, refilled_at = now() WHERE name = 'slow'`)
	require.NoError(t, err)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // reads only
	checkReads(t, tx, agent.ID, func(next time.Duration) {
		require.InDelta(t, 100, next.Seconds(), 2, "the class's next token, when the other job's task is the agent's")
	})
}

// TestADegradedClassBacklogStaysOutOfOtherLeases: a class degraded to
// priority 8 has 20,000 tasks of priority 1 waiting an hour (half routed
// to the agent below), one task at 9, and tokens to spare. Once the
// reaper's sweeps held the backlog below the floor (migration 00086), a
// lease given the class's tokens reads a few task rows to take the task
// at 9 and another tenant's, and the idle check a few to say nothing is
// leasable, and the reaper's next sweep a few to skip, hold and release.
// Before, the lease read 60,004 task rows (its groups walk the backlog
// and drop it on the floor), the check 40,000 (20,000 with the generic
// plan) and each sweep's skip 20,002 (another job of the class skips
// rather than waits: its task is skipped). The backlog is still counted, and a
// restore releases it: its tasks lease at once.
func TestADegradedClassBacklogStaysOutOfOtherLeases(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	other := e.agent(nil, nil)
	floor := 8
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "billing", Rate: 1000, Burst: 1000,
		ManualMinPriority: &floor})
	require.NoError(t, err)
	low := e.job(func(j *axtype.Job) {
		j.ShardCount, j.Priority, j.RateLimitClass = 10_000, 1, "billing"
	})
	e.trigger(low.ID)
	e.trigger(low.ID)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET not_before = not_before - interval '1 hour',
		preferred_agent_id = CASE WHEN shard_index % 2 = 0 THEN $2::uuid END WHERE job_id = $1`, low.ID, other.ID)
	require.NoError(t, err)
	high := e.job(func(j *axtype.Job) { j.Priority, j.RateLimitClass = 9, "billing" })
	e.trigger(high.ID)
	skip := e.job(func(j *axtype.Job) {
		j.Priority, j.RateLimitClass, j.DegradeAction = 1, "billing", axtype.DegradeSkip
	})
	skipRun := e.trigger(skip.ID)
	mine := e.job(nil)
	e.trigger(mine.ID)
	// Statistics taken while the backlog waits unheld (as autovacuum's
	// may be): the sweeps' plans must still read it in index order.
	_, err = e.pool.Exec(ctx, "ANALYZE ax.task")
	require.NoError(t, err)

	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})
	heldCount := func() (n int) {
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.task WHERE floor_held`).Scan(&n))
		return n
	}
	for range 20_000/dispatch.FloorMoveTasks + 1 {
		require.NoError(t, reaper.Sweep(ctx))
	}
	require.Equal(t, 20_000, heldCount(), "the backlog below the floor is held")
	var skippedState string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state FROM ax.all_tasks WHERE execution_id = $1`,
		skipRun.ID).Scan(&skippedState))
	require.Equal(t, "cancelled", skippedState, "a job that skips rather than waits: skipped")
	// and the sweeps after do not read it again.
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // a failed assertion leaves it open: the pool's close would wait for it
	before := taskRowsRead(t, tx)
	skipped, err := db.TaskSkipBelowFloor(ctx, tx, dispatch.FloorMoveTasks)
	require.NoError(t, err)
	require.Empty(t, skipped)
	held, err := db.TaskFloorHold(ctx, tx, dispatch.FloorMoveTasks, dispatch.FloorHoldSettle)
	require.NoError(t, err)
	require.Zero(t, held)
	released, err := db.TaskFloorRelease(ctx, tx, dispatch.FloorMoveTasks)
	require.NoError(t, err)
	require.Zero(t, released)
	require.Less(t, taskRowsRead(t, tx)-before, int64(100), "task rows the sweep's skip, hold and release read")
	require.NoError(t, tx.Rollback(ctx))

	tx, err = e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read only what the lease read; its changes go
	got, reads := leaseReading(t, tx, other.ID, map[string]int{"billing": 10})
	jobs := []uuid.UUID{}
	for _, lt := range got {
		jobs = append(jobs, lt.JobID)
	}
	require.ElementsMatch(t, []uuid.UUID{high.ID, mine.ID}, jobs)
	require.Less(t, reads, int64(100), "task rows the lease read")
	checkReads(t, tx, other.ID, func(next time.Duration) {
		require.Equal(t, time.Hour, next, "nothing leasable: the backlog is below the floor")
	})
	require.NoError(t, tx.Rollback(ctx))

	backlog, err := db.TaskCountBacklog(ctx, e.pool)
	require.NoError(t, err)
	var depth int64
	for _, b := range backlog {
		if b.Class == "billing" && b.Priority == 1 {
			depth += b.Depth
		}
	}
	require.EqualValues(t, 20_000, depth, "held tasks are counted, once")

	// A restore releases what it can at once (the reaper the rest), and
	// the class's tasks lease.
	_, err = dispatch.NewRateClasses(e.pool, nil).Restore(ctx, "billing")
	require.NoError(t, err)
	require.Equal(t, 20_000-dispatch.FloorMoveTasks, heldCount())
	leased := e.lease(other, 10)
	require.Len(t, leased, 10)
	for _, lt := range leased {
		require.Equal(t, low.ID, lt.JobID)
	}
	for range 20_000/dispatch.FloorMoveTasks + 1 {
		require.NoError(t, reaper.Sweep(ctx))
	}
	require.Zero(t, heldCount())
}

// TestClassListingCountsToItsCap: listing the classes (ax class list, the
// console, GET /v1/classes) counts a class's ready tasks to 10,000 and
// says "more than" past it; a small class's count is exact, and the
// oldest wait is the oldest's. Before, each call read every class's
// backlog whole: 20,000 rows here, on each call of any key that may read
// classes.
func TestClassListingCountsToItsCap(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	for _, name := range []string{"bulk", "small"} {
		_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: name, Rate: 1, Burst: 1})
		require.NoError(t, err)
	}
	bulk := e.job(func(j *axtype.Job) { j.ShardCount, j.RateLimitClass = 10_000, "bulk" })
	e.trigger(bulk.ID)
	e.trigger(bulk.ID)
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET not_before = now() - interval '1 hour'
		WHERE job_id = $1 AND shard_index = 9999`, bulk.ID)
	require.NoError(t, err)
	e.trigger(e.job(func(j *axtype.Job) { j.ShardCount, j.RateLimitClass = 3, "small" }).ID)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // reads only
	before := taskRowsRead(t, tx)
	classes, err := db.RateClassList(ctx, tx, "")
	require.NoError(t, err)
	require.Less(t, taskRowsRead(t, tx)-before, int64(db.RateClassWaitingCap+100), "task rows the listing read")
	require.Len(t, classes, 2)
	require.Equal(t, "bulk", classes[0].Name)
	require.EqualValues(t, db.RateClassWaitingCap, classes[0].Waiting)
	require.True(t, classes[0].WaitingCapped, "more than 10,000 wait")
	require.InDelta(t, time.Hour.Seconds(), classes[0].OldestWait.Seconds(), 5, "the oldest's wait")
	require.EqualValues(t, 3, classes[1].Waiting)
	require.False(t, classes[1].WaitingCapped)
}

// TestAutoDegradeCountsToItsThreshold: a class degrading past 1,000
// waiting tasks has 20,000 waiting. The sweep's pressure check reads the
// class's backlog to one past the threshold and degrades it; before, it
// counted all 20,000 every sweep, in the reaper's transaction. Raised
// past the backlog, the threshold lifts the degradation, and an oldest
// wait past its own threshold degrades it again.
func TestAutoDegradeCountsToItsThreshold(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	minPriority, depth := 5, 1000
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "bulk", Rate: 1, Burst: 1,
		AutoMinPriority: &minPriority, AutoDepth: &depth})
	require.NoError(t, err)
	job := e.job(func(j *axtype.Job) { j.ShardCount, j.Priority, j.RateLimitClass = 10_000, 1, "bulk" })
	e.trigger(job.ID)
	e.trigger(job.ID)

	degrade := func(most int64) []axtype.DegradeChange {
		t.Helper()
		tx, err := e.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // committed below; a failed assertion leaves it open
		before := taskRowsRead(t, tx)
		changes, err := db.RateClassDegradeAuto(ctx, tx)
		require.NoError(t, err)
		require.LessOrEqual(t, taskRowsRead(t, tx)-before, most, "task rows the pressure check read")
		require.NoError(t, tx.Commit(ctx))
		return changes
	}
	changes := degrade(1002)
	require.Len(t, changes, 1)
	require.True(t, changes[0].Degraded, "20,000 waiting, past 1,000")
	require.Empty(t, degrade(1002), "still past it")
	// Its tasks are held once the floor has held FloorHoldSettle, not at
	// once: a class that hovers at its threshold is not rewritten both
	// ways every sweep.
	held, err := db.TaskFloorHold(ctx, e.pool, dispatch.FloorMoveTasks, dispatch.FloorHoldSettle)
	require.NoError(t, err)
	require.Zero(t, held, "degraded a moment ago")
	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET degraded_since = now() - interval '1 minute' WHERE name = 'bulk'`)
	require.NoError(t, err)
	held, err = db.TaskFloorHold(ctx, e.pool, dispatch.FloorMoveTasks, dispatch.FloorHoldSettle)
	require.NoError(t, err)
	require.Equal(t, dispatch.FloorMoveTasks, held, "degraded a minute ago")

	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET auto_depth = 30000 WHERE name = 'bulk'`)
	require.NoError(t, err)
	changes = degrade(20_001)
	require.Len(t, changes, 1)
	require.False(t, changes[0].Degraded, "20,000 waiting, under 30,000")

	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET auto_age_seconds = 60 WHERE name = 'bulk'`)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET not_before = not_before - interval '1 hour' WHERE job_id = $1`, job.ID)
	require.NoError(t, err)
	changes = degrade(20_002)
	require.Len(t, changes, 1)
	require.True(t, changes[0].Degraded, "the oldest waited an hour, past 60 s")
}

// TestABusyAgentsPinnedTasksStayOutOfOtherLeases: 5,000 pinned tasks (a
// broadcast job's shares of one busy agent) have waited an hour. Another
// agent's lease reads a few task rows to take its own task, and its idle
// check a few to say nothing is leasable. Before migration 00087 the
// lease read 10,002 rows (the starved and stealable groups walked the
// pool's pinned tasks and dropped them) and the check 11,000, answering
// that a task had been leasable for an hour: its long polls woke to
// lease nothing. The busy agent still takes its own oldest first, ahead
// of a fresher task of higher priority routed to it.
func TestABusyAgentsPinnedTasksStayOutOfOtherLeases(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	busy := e.agent(nil, nil)
	other := e.agent(nil, nil)
	shares := e.job(func(j *axtype.Job) { j.ShardCount, j.Priority = 5000, 1 })
	e.trigger(shares.ID)
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET pinned = true, preferred_agent_id = $2,
		not_before = now() - interval '1 hour' + make_interval(secs => shard_index / 10.0) WHERE job_id = $1`, shares.ID, busy.ID)
	require.NoError(t, err)
	hot := e.job(func(j *axtype.Job) { j.Priority = 9 })
	e.trigger(hot.ID)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET preferred_agent_id = $2 WHERE job_id = $1`, hot.ID, busy.ID)
	require.NoError(t, err)
	mine := e.job(nil)
	e.trigger(mine.ID)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read only what the lease read; its changes go
	got, reads := leaseReading(t, tx, other.ID, nil)
	require.Len(t, got, 1)
	require.Equal(t, mine.ID, got[0].JobID)
	require.Less(t, reads, int64(100), "task rows the lease read")
	checkReads(t, tx, other.ID, func(next time.Duration) {
		// The hot task is routed to the busy agent: stealable after 2 s.
		require.InDelta(t, 2, next.Seconds(), 1, "nothing leasable but the busy agent's routed task, in 2 s")
	})
	require.NoError(t, tx.Rollback(ctx))

	var first uuid.UUID
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id FROM ax.task WHERE job_id = $1 AND shard_index = 0`,
		shares.ID).Scan(&first))
	leased := e.lease(busy, 1)
	require.Len(t, leased, 1)
	require.Equal(t, first, leased[0].ID, "the busy agent's oldest pinned task, starved, ahead of the hot one")
	backlog, err := db.TaskCountBacklog(ctx, e.pool)
	require.NoError(t, err)
	var depth int64
	for _, b := range backlog {
		depth += b.Depth
	}
	require.EqualValues(t, 4999+1+1, depth, "pinned tasks are counted, once")
}

// TestAWaitingPinnedBacklogStaysOutOfTheSharedCheck: 5,000 tasks pinned
// to one agent wait to retry in ten minutes. The check that a replica
// runs for all its waiting polls at once reads that agent's first 1,000
// and answers ten minutes for it, or a little before, and the other
// agent's answer is unchanged. Before, the check read all 5,000 for the
// agent, in the statement it shares with every agent checking beside it.
func TestAWaitingPinnedBacklogStaysOutOfTheSharedCheck(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	waiting := e.agent(nil, nil)
	other := e.agent(nil, nil)
	shares := e.job(func(j *axtype.Job) { j.ShardCount = 5000 })
	e.trigger(shares.ID)
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET pinned = true, preferred_agent_id = $2,
		not_before = now() + interval '10 minutes' + make_interval(secs => shard_index / 100.0) WHERE job_id = $1`,
		shares.ID, waiting.ID)
	require.NoError(t, err)

	check := func(want func(outlook map[uuid.UUID]*axtype.LeaseOutlook)) {
		t.Helper()
		tx, err := e.pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx) //nolint:errcheck // reads only
		for _, mode := range []string{"auto", "force_generic_plan"} {
			_, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, mode)
			require.NoError(t, err)
			before := taskRowsRead(t, tx)
			outlook, err := db.TaskNextLeasable(ctx, tx, []uuid.UUID{waiting.ID, other.ID}, 2*time.Second, nil)
			require.NoError(t, err)
			want(outlook)
			require.Less(t, taskRowsRead(t, tx)-before, int64(1_100), "task rows the check read (%s)", mode)
		}
	}
	check(func(outlook map[uuid.UUID]*axtype.LeaseOutlook) {
		next := outlook[waiting.ID].Next
		require.InDelta(t, (10 * time.Minute).Seconds(), next.Seconds(), 3, "its first pinned task's time")
		require.LessOrEqual(t, next, 10*time.Minute, "never later")
		require.Equal(t, time.Hour, outlook[other.ID].Next, "nothing for the other agent")
	})

	// Its first 1,000 not leasable by a rule the check applies after the
	// read (a concurrency key at its limit): the 1,000th's time answers for
	// the rest, early, never late.
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET concurrency_scope = 'test', concurrency_key = 'k', concurrency_limit = 1
		WHERE job_id = $1 AND shard_index <= 1000`, shares.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET state = 'leased', lease_token = gen_random_uuid(),
		lease_expires_at = now() + interval '1 hour', agent_id = $2 WHERE job_id = $1 AND shard_index = 1000`,
		shares.ID, waiting.ID)
	require.NoError(t, err)
	check(func(outlook map[uuid.UUID]*axtype.LeaseOutlook) {
		next := outlook[waiting.ID].Next
		require.InDelta(t, (10*time.Minute + 10*time.Second).Seconds(), next.Seconds(), 3, "the first of the rest")
		require.LessOrEqual(t, next, 10*time.Minute+10*time.Second+10*time.Millisecond, "never later")
	})

	mine := e.job(nil)
	e.trigger(mine.ID)
	check(func(outlook map[uuid.UUID]*axtype.LeaseOutlook) {
		require.Zero(t, outlook[other.ID].Next, "its task is due")
		require.Zero(t, outlook[waiting.ID].Next, "for either agent")
	})
}

// TestAPinnedBacklogReadyButNotLeasableIsNotNow: 1,000 tasks pinned to
// an agent are ready, but none is leasable: their class is out of
// tokens, then their job's executor is one the agent no longer accepts.
// The check answers the class's next token, then an hour, as it does for
// 999. When it answered the 1,000th task's time for the rest (past), the
// agent's poll leased nothing and checked again about once a second
// (a review's test: 13 checks in a 6 s poll).
func TestAPinnedBacklogReadyButNotLeasableIsNotNow(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "slow", Rate: 0.01, Burst: 1})
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET tokens = 0, refilled_at = now() WHERE name = 'slow'`)
	require.NoError(t, err)
	agent := e.agent(nil, nil)
	other := e.agent(nil, nil)
	shares := e.job(func(j *axtype.Job) { j.ShardCount, j.RateLimitClass = 1000, "slow" })
	e.trigger(shares.ID)
	// Shard 999 is another agent's at first: 999, then 1,000, are this one's.
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET pinned = true, not_before = now() - interval '1 minute',
		preferred_agent_id = CASE WHEN shard_index = 999 THEN $3 ELSE $2 END::uuid WHERE job_id = $1`,
		shares.ID, agent.ID, other.ID)
	require.NoError(t, err)
	next := func() time.Duration {
		t.Helper()
		outlook, err := db.TaskNextLeasable(ctx, e.pool, []uuid.UUID{agent.ID}, 2*time.Second, nil)
		require.NoError(t, err)
		return outlook[agent.ID].Next
	}
	toShard999 := func() {
		t.Helper()
		_, err := e.pool.Exec(ctx, `UPDATE ax.task SET preferred_agent_id = $2 WHERE job_id = $1 AND shard_index = 999`,
			shares.ID, agent.ID)
		require.NoError(t, err)
	}
	require.InDelta(t, 100, next().Seconds(), 2, "999 pinned: the class's next token")
	toShard999()
	require.InDelta(t, 100, next().Seconds(), 2, "1,000 pinned: the same")

	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET tokens = 1 WHERE name = 'slow'`)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET preferred_agent_id = $2 WHERE job_id = $1 AND shard_index = 999`,
		shares.ID, other.ID)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `UPDATE ax.job SET executor_kind = 'http',
		executor = '{"kind": "http", "url": "http://127.0.0.1:9/x", "method": "POST"}' WHERE id = $1`, shares.ID)
	require.NoError(t, err)
	require.Equal(t, time.Hour, next(), "999 pinned of an executor it does not take: nothing")
	toShard999()
	require.Equal(t, time.Hour, next(), "1,000: the same")
}

// TestASkipJobsTasksBelowTheFloorAreSkippedNotHeld: a job that skips
// rather than waits has its tasks below the floor skipped, never held,
// both when a fire commits between the sweep's skip and its hold (each
// statement of the sweep sees what committed before it) and when the
// job switches from waiting to skipping while its tasks are held.
// Before, such tasks were held and the skip, which reads no held task,
// never skipped them: they ran once the floor lifted.
func TestASkipJobsTasksBelowTheFloorAreSkippedNotHeld(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	floor := 8
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "billing", Rate: 1000, Burst: 1000,
		ManualMinPriority: &floor})
	require.NoError(t, err)
	skip := e.job(func(j *axtype.Job) {
		j.Priority, j.RateLimitClass, j.DegradeAction = 1, "billing", axtype.DegradeSkip
	})
	switched := e.job(func(j *axtype.Job) { j.Priority, j.RateLimitClass = 1, "billing" })
	waited := e.trigger(switched.ID)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})
	require.NoError(t, reaper.Sweep(ctx))
	state := func(run uuid.UUID) (state string, held bool) {
		t.Helper()
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT state, floor_held FROM ax.all_tasks WHERE execution_id = $1`,
			run).Scan(&state, &held))
		return state, held
	}
	_, held := state(waited.ID)
	require.True(t, held, "a job that waits: its task is held")

	// The sweep's skip, then a fire of the skipping job, then its hold.
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // committed below; a failed assertion leaves it open
	skipped, err := db.TaskSkipBelowFloor(ctx, tx, dispatch.FloorMoveTasks)
	require.NoError(t, err)
	require.Empty(t, skipped)
	late := e.trigger(skip.ID)
	n, err := db.TaskFloorHold(ctx, tx, dispatch.FloorMoveTasks, dispatch.FloorHoldSettle)
	require.NoError(t, err)
	require.Zero(t, n, "the skipping job's task is left to the skip")
	require.NoError(t, tx.Commit(ctx))

	_, err = e.pool.Exec(ctx, `UPDATE ax.job SET degrade_action = 'skip' WHERE id = $1`, switched.ID)
	require.NoError(t, err)
	require.NoError(t, reaper.Sweep(ctx))
	for _, run := range []uuid.UUID{late.ID, waited.ID} {
		s, held := state(run)
		require.Equal(t, "cancelled", s, "a job that skips rather than waits: skipped (held: %v)", held)
	}
}

// TestAgentlessTasksBelowTheFloorAreHeld: 10,000 agentless (HTTP) tasks
// below their class's floor are held as agents' tasks are, so the
// sweeps after read none of them; ax serve still leases one once the
// floor lifts. Left unheld, every sweep's hold read all 10,000 again.
func TestAgentlessTasksBelowTheFloorAreHeld(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	floor := 8
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "billing", Rate: 1000, Burst: 1000,
		ManualMinPriority: &floor})
	require.NoError(t, err)
	web := e.job(func(j *axtype.Job) {
		j.ShardCount, j.Priority, j.RateLimitClass = 10_000, 1, "billing"
		j.ExecutorKind, j.Executor = axtype.ExecutorHTTP, axtype.ExecutorConfig{URL: "http://127.0.0.1:9/", Method: "POST"}
	})
	run := e.trigger(web.ID)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})
	for range 10_000/dispatch.FloorMoveTasks + 1 {
		require.NoError(t, reaper.Sweep(ctx))
	}
	var held int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.task WHERE agentless AND floor_held`).Scan(&held))
	require.Equal(t, 10_000, held)

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read only what the sweep's statements read
	before := taskRowsRead(t, tx)
	_, err = db.TaskSkipBelowFloor(ctx, tx, dispatch.FloorMoveTasks)
	require.NoError(t, err)
	n, err := db.TaskFloorHold(ctx, tx, dispatch.FloorMoveTasks, dispatch.FloorHoldSettle)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Less(t, taskRowsRead(t, tx)-before, int64(100), "task rows the sweep's skip and hold read")
	require.NoError(t, tx.Rollback(ctx))

	// Restored, ax serve leases a task still held (the release has not
	// reached it): the lease clears floor_held.
	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET manual_min_priority = NULL WHERE name = 'billing'`)
	require.NoError(t, err)
	var id uuid.UUID
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT id FROM ax.task WHERE execution_id = $1 AND shard_index = 0`,
		run.ID).Scan(&id))
	leased, err := db.TaskLeaseAgentless(ctx, e.pool, id, 1, time.Minute)
	require.NoError(t, err)
	require.NotNil(t, leased)
	var stillHeld bool
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT floor_held FROM ax.task WHERE id = $1`, id).Scan(&stillHeld))
	require.False(t, stillHeld)
}

// TestAutoDegradeAtTheLargestDepth: a class whose automatic threshold is
// the largest integer. The pressure check counted to the threshold plus
// one, in integers: it overflowed, and the error rolled back every sweep,
// so no lease expired (a review of 59bd1af found it).
func TestAutoDegradeAtTheLargestDepth(t *testing.T) {
	e := setup(t, func(c *dispatch.AgentConfig) { c.Lease = 200 * time.Millisecond })
	ctx := context.Background()
	minPriority, depth := 5, math.MaxInt32
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "bulk", Rate: 1, Burst: 1,
		AutoMinPriority: &minPriority, AutoDepth: &depth})
	require.NoError(t, err)
	run := e.trigger(e.job(nil).ID)
	leased := e.lease(e.agent(nil, nil), 1)
	require.Len(t, leased, 1)
	require.Equal(t, run.ID, leased[0].ExecutionID)
	time.Sleep(300 * time.Millisecond)
	_, err = db.RateClassDegradeAuto(ctx, e.pool)
	require.NoError(t, err, "the pressure check")
	reaper := dispatch.NewReaper(e.pool, dispatch.AgentConfig{Lease: time.Minute}, dispatch.ReaperConfig{})
	require.NoError(t, reaper.Sweep(ctx), "the sweep")
	require.NotEqual(t, axtype.TaskState("leased"), e.task(leased[0].ID).State, "the expired lease reaped")
}

// TestAJobSwitchedToSkipDuringAHoldIsSkipped: a job switches from
// waiting to skipping while a hold runs. Its update's trigger let go of
// the job's held tasks before the hold, whose snapshot still said
// "wait", held its task: never skipped, it ran once the floor lifted (a
// review of 7e37162 found it). The hold now passes over a job whose row
// is being changed.
func TestAJobSwitchedToSkipDuringAHoldIsSkipped(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	floor := 8
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "billing", Rate: 1000, Burst: 1000,
		ManualMinPriority: &floor})
	require.NoError(t, err)
	job := e.job(func(j *axtype.Job) { j.Priority, j.RateLimitClass = 1, "billing" })
	run := e.trigger(job.ID)
	sw, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer sw.Rollback(ctx) //nolint:errcheck // committed below; a failed assertion leaves it open
	_, err = sw.Exec(ctx, `UPDATE ax.job SET degrade_action = 'skip' WHERE id = $1`, job.ID)
	require.NoError(t, err)
	n, err := db.TaskFloorHold(ctx, e.pool, dispatch.FloorMoveTasks, dispatch.FloorHoldSettle)
	require.NoError(t, err)
	require.Zero(t, n, "the job's row is being changed: passed over")
	require.NoError(t, sw.Commit(ctx))
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})
	require.NoError(t, reaper.Sweep(ctx))
	var state string
	var held bool
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state, floor_held FROM ax.all_tasks WHERE execution_id = $1`,
		run.ID).Scan(&state, &held))
	require.Equal(t, "cancelled", state, "a job that skips: skipped (held: %v)", held)
}

// TestTheSkipReadsABoundedPartWhileTheFloorSettles: an automatic floor
// holds its class's tasks only once it has been in force 10 s, 2,000 a
// sweep. Meanwhile each sweep's skip read the class's whole backlog
// below the floor to find a skipping job's task (40,002 rows here, a
// review of 7e37162 found it); it reads its first 2,000 now, and the
// skipping job's task is skipped once the hold has moved those before it.
func TestTheSkipReadsABoundedPartWhileTheFloorSettles(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	minPriority, depth := 5, 1000
	_, err := db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "bulk", Rate: 1, Burst: 1,
		AutoMinPriority: &minPriority, AutoDepth: &depth})
	require.NoError(t, err)
	job := e.job(func(j *axtype.Job) { j.ShardCount, j.Priority, j.RateLimitClass = 10_000, 1, "bulk" })
	e.trigger(job.ID)
	e.trigger(job.ID)
	skip := e.job(func(j *axtype.Job) { j.Priority, j.RateLimitClass, j.DegradeAction = 1, "bulk", axtype.DegradeSkip })
	run := e.trigger(skip.ID)
	_, err = e.pool.Exec(ctx, `ANALYZE ax.task`)
	require.NoError(t, err)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})
	require.NoError(t, reaper.Sweep(ctx)) // degrades it

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // reads only
	before := taskRowsRead(t, tx)
	_, err = db.TaskSkipBelowFloor(ctx, tx, dispatch.FloorMoveTasks)
	require.NoError(t, err)
	require.LessOrEqual(t, taskRowsRead(t, tx)-before, int64(dispatch.FloorMoveTasks+100),
		"task rows the sweep's skip read while the floor settles")
	require.NoError(t, tx.Rollback(ctx))

	_, err = e.pool.Exec(ctx, `UPDATE ax.rate_class SET degraded_since = now() - interval '1 minute' WHERE name = 'bulk'`)
	require.NoError(t, err)
	for range 20_000/dispatch.FloorMoveTasks + 2 {
		require.NoError(t, reaper.Sweep(ctx))
	}
	var state string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT state FROM ax.all_tasks WHERE execution_id = $1`,
		run.ID).Scan(&state))
	require.Equal(t, "cancelled", state, "the skipping job's task, once the backlog before it is held")
}

// TestALeaseLocksOnlyTheTasksItTakesAcrossPools: an agent whose labels
// match four pools, each with 60 ready tasks of its own priority, asks
// for 100. Whether the tasks are unassigned, starved or routed to
// another agent past the steal delay, it gets the 60 of the first pool
// in its group's order and 40 of the next, and its transaction holds no
// lock on a task it did not take. Before, each pool's read locked up to
// the whole 100 before the pools were merged: 140 tasks locked and left
// pending, kept from every other lease until this one committed. With
// 30 tasks routed to it, it takes those and 20 unassigned, and locks no
// more (the unassigned reads asked for its whole room before).
func TestALeaseLocksOnlyTheTasksItTakesAcrossPools(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	a := e.agent(map[string]string{"a": "1", "b": "1", "c": "1"}, nil)
	other := e.agent(nil, nil)
	jobs := map[int]uuid.UUID{}
	for priority, labels := range map[int]map[string]string{
		9: nil, 8: {"a": "1"}, 7: {"b": "1"}, 6: {"c": "1"},
	} {
		j := e.job(func(j *axtype.Job) { j.TargetLabels, j.ShardCount, j.Priority = labels, 60, priority })
		e.trigger(j.ID)
		jobs[priority] = j.ID
	}
	var pools int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(DISTINCT pool_id) FROM ax.task WHERE state = 'pending'`).Scan(&pools))
	require.Equal(t, 4, pools)

	for _, c := range []struct {
		name string
		// set writes every pending task anew (the rolled-back lease
		// before left its xid in the rows it locked): $1 is a, $2 other,
		// $3 the priority-6 job.
		set  string
		max  int
		want map[int]int // tasks leased per job, by the job's priority
	}{{
		name: "unassigned",
		set:  `preferred_agent_id = NULL, fallback_agent_id = NULL, not_before = now() - interval '10 seconds'`,
		max:  100, want: map[int]int{9: 60, 8: 40},
	}, {
		name: "starved, oldest first",
		set: `preferred_agent_id = NULL, fallback_agent_id = NULL,
			not_before = now() - interval '2 hours' - priority * interval '1 minute'`,
		max: 100, want: map[int]int{9: 60, 8: 40},
	}, {
		name: "stolen, oldest first",
		set: `preferred_agent_id = $2, fallback_agent_id = NULL,
			not_before = now() - interval '10 seconds' - priority * interval '1 second'`,
		max: 100, want: map[int]int{9: 60, 8: 40},
	}, {
		name: "its own first, then the room left",
		set: `preferred_agent_id = CASE WHEN id IN (SELECT id FROM ax.task WHERE job_id = $3 ORDER BY shard_index LIMIT 30)
			THEN $1::uuid END, fallback_agent_id = NULL, not_before = now() - interval '10 seconds'`,
		max: 50, want: map[int]int{6: 30, 9: 20},
	}} {
		_, err := e.pool.Exec(ctx, `UPDATE ax.task SET `+c.set+` WHERE state = 'pending' AND $1::uuid IS NOT NULL
			AND $2::uuid IS NOT NULL AND $3::uuid IS NOT NULL`, a.ID, other.ID, jobs[6])
		require.NoError(t, err, c.name)
		tx, err := e.pool.Begin(ctx)
		require.NoError(t, err)
		got, err := dispatch.Lease(ctx, tx, &dispatch.LeaseParams{AgentID: a.ID, AgentLabels: a.Labels,
			AgentExecutors: []string{"shell"}, Max: c.max, Lease: 30 * time.Second, StealAfter: 2 * time.Second,
			StarveAfter: time.Hour})
		require.NoError(t, err, c.name)
		perJob := map[int]int{}
		for _, lt := range got {
			for priority, id := range jobs {
				if lt.JobID == id {
					perJob[priority]++
				}
			}
		}
		require.Equal(t, c.want, perJob, c.name)
		// (The lease locked in a subtransaction of tx, a savepoint, under
		// an xid of its own; set left every pending row's version an xmax
		// of 0.)
		var lockedPending int
		require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM ax.task
			WHERE state = 'pending' AND xmax <> '0'::xid`).Scan(&lockedPending))
		require.NoError(t, tx.Rollback(ctx))
		require.Zero(t, lockedPending, "%s: tasks the lease locked and did not take", c.name)
	}
}

// TestALeaseOfOneBusyPoolAmongSeveralReadsItOnce: an agent of two
// pools, one of them with 300 unassigned ready tasks and the other with
// none, reads each task it leases once: a pool's share of the lease is
// counted beforehand only when more than one pool has tasks of the
// group (a probe of each pool's index says so). The lease reads each
// task twice, to pick it and to lease it by key (200 rows for 100, as
// before the shares), and a row of the probe; counted always, the busy
// pool was read a third time: 300.
func TestALeaseOfOneBusyPoolAmongSeveralReadsItOnce(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	a := e.agent(map[string]string{"a": "1"}, nil)
	e.job(nil) // the untargeted pool's, idle
	busy := e.job(func(j *axtype.Job) { j.TargetLabels, j.ShardCount = map[string]string{"a": "1"}, 300 })
	e.trigger(busy.ID)
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET preferred_agent_id = NULL, fallback_agent_id = NULL,
		not_before = now() - interval '10 seconds'`)
	require.NoError(t, err)
	var pools int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(DISTINCT p) FROM ax.lease_pools($1, '{shell}', false, '{}') AS p`,
		`{"a": "1"}`).Scan(&pools))
	require.Equal(t, 2, pools, "the agent's pools: the idle job's and the busy one's")

	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // read only what the lease read
	before := taskRowsRead(t, tx)
	got, err := dispatch.Lease(ctx, tx, &dispatch.LeaseParams{AgentID: a.ID, AgentLabels: a.Labels,
		AgentExecutors: []string{"shell"}, Max: 100, Lease: 30 * time.Second, StealAfter: 2 * time.Second,
		StarveAfter: time.Hour})
	require.NoError(t, err)
	require.Len(t, got, 100)
	for _, lt := range got {
		require.Equal(t, busy.ID, lt.JobID)
	}
	require.Less(t, taskRowsRead(t, tx)-before, int64(250), "task rows the lease read")
}

// TestALeaseBesideAnotherFillsItsRoomFromOtherPools: an agent of two
// pools, one with 100 unassigned tasks of priority 9 and the other with
// 300 of priority 5, leases 100 (the 100 of priority 9) and has not
// committed when a second lease for it asks for 100. The second gets
// 100 of priority 5. Its pool shares counted the first lease's tasks (a
// read without locks sees them pending) and gave the other pool none:
// before it picked again without shares, it got nothing. A lease that
// takes all its shares counted picks once, though it asked for more.
func TestALeaseBesideAnotherFillsItsRoomFromOtherPools(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	a := e.agent(map[string]string{"a": "1"}, nil)
	high := e.job(func(j *axtype.Job) { j.TargetLabels, j.ShardCount, j.Priority = map[string]string{"a": "1"}, 100, 9 })
	low := e.job(func(j *axtype.Job) { j.ShardCount, j.Priority = 300, 5 })
	e.trigger(high.ID)
	e.trigger(low.ID)
	_, err := e.pool.Exec(ctx, `UPDATE ax.task SET preferred_agent_id = NULL, fallback_agent_id = NULL,
		not_before = now() - interval '10 seconds'`)
	require.NoError(t, err)
	statements := &dbtest.Statements{}
	traced := e.poolTracedBy(statements)
	lease := func(tx pgx.Tx, max int) map[uuid.UUID]int {
		got, err := dispatch.Lease(ctx, tx, &dispatch.LeaseParams{AgentID: a.ID, AgentLabels: a.Labels,
			AgentExecutors: []string{"shell"}, Max: max, Lease: 30 * time.Second, StealAfter: 2 * time.Second,
			StarveAfter: time.Hour})
		require.NoError(t, err)
		perJob := map[uuid.UUID]int{}
		for _, lt := range got {
			perJob[lt.JobID]++
		}
		return perJob
	}
	// Alone, asking for more than the pools hold, a lease takes all the
	// shares counted: short of its max, not of its shares, so one pick.
	alone, err := traced.Begin(ctx)
	require.NoError(t, err)
	defer alone.Rollback(ctx) //nolint:errcheck // rolled back below; this when a check fails first
	require.Equal(t, map[uuid.UUID]int{high.ID: 100, low.ID: 300}, lease(alone, 500))
	require.Equal(t, 1, statements.Count("TaskLeasePick"), "picks of a lease that took its shares")
	require.NoError(t, alone.Rollback(ctx))

	first, err := traced.Begin(ctx)
	require.NoError(t, err)
	defer first.Rollback(ctx) //nolint:errcheck // held open beside the second
	require.Equal(t, map[uuid.UUID]int{high.ID: 100}, lease(first, 100))
	require.Equal(t, 2, statements.Count("TaskLeasePick"))
	second, err := traced.Begin(ctx)
	require.NoError(t, err)
	defer second.Rollback(ctx) //nolint:errcheck // only what it got is looked at
	require.Equal(t, map[uuid.UUID]int{low.ID: 100}, lease(second, 100), "the second lease, beside the first")
	require.Equal(t, 4, statements.Count("TaskLeasePick"), "the second came short of its shares: it picked twice")
}
