package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// TestTasksNoAgentCanTakeStayOutOfOtherLeases: a job aimed at labels no
// agent has, fired twice with 10,000 shards at a high priority, leaves
// 20,000 pending tasks that waited an hour. They are written parked, and
// another tenant's lease reads a few task rows to find its own task
// (before migration 00076 it read every one of them, in the starved and
// unassigned groups, and dropped them on their job's labels: 40,000 rows
// fetched), nor does an idle long poll's check. The backlog metric
// still counts them. Once an agent with the labels registers, its
// registration unparks 10,000 of them, the reaper's next sweep the rest,
// and it leases them.
func TestTasksNoAgentCanTakeStayOutOfOtherLeases(t *testing.T) {
	e := setup(t, nil)
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{Refresh: time.Nanosecond}, nil, nil)
	require.NoError(t, err)
	e.router = router
	ctx := context.Background()
	other := e.agent(nil, nil)

	gpu := e.job(func(j *axtype.Job) {
		j.TargetLabels, j.ShardCount, j.Priority = map[string]string{"pool": "gpu"}, 10_000, 9
	})
	e.trigger(gpu.ID)
	e.trigger(gpu.ID)
	_, err = e.pool.Exec(ctx, `UPDATE ax.task SET not_before = not_before - interval '1 hour' WHERE job_id = $1`, gpu.ID)
	require.NoError(t, err)
	parked := func(jobID any) int {
		var n int
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM ax.task
			WHERE job_id = $1 AND state = 'pending' AND no_agent`, jobID).Scan(&n))
		return n
	}
	require.Equal(t, 20_000, parked(gpu.ID), "no agent has the labels: written parked")
	// Writing 20,000 tasks under -race on a loaded machine can take longer
	// than the two heartbeats an agent stays a routing candidate without
	// one: it heartbeats, as a live agent does.
	ready := true
	_, err = e.broker.Heartbeat(ctx, other.ID, nil, &axtype.AgentLoad{Ready: &ready})
	require.NoError(t, err)
	mine := e.job(nil)
	run := e.trigger(mine.ID)
	require.Zero(t, parked(mine.ID), "an agent can take it")

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
	// Nor does an idle long poll's check read them (it read every pending
	// task: 20,000 more each time the agent's poll looked).
	before = read()
	outlook, err := db.TaskNextLeasable(ctx, tx, []uuid.UUID{other.ID}, 2*time.Second, nil)
	require.NoError(t, err)
	require.Equal(t, time.Hour, outlook[other.ID].Next, "nothing the agent could lease")
	require.Less(t, read()-before, int64(100), "task rows the long poll's check read")
	require.NoError(t, tx.Rollback(ctx))

	backlog, err := db.TaskCountBacklog(ctx, e.pool)
	require.NoError(t, err)
	depth := int64(0)
	for _, b := range backlog {
		depth += b.Depth
	}
	require.Equal(t, int64(20_001), depth, "parked tasks are backlog")

	gpuAgent := e.agent(map[string]string{"pool": "gpu"}, nil)
	require.Equal(t, 10_000, parked(gpu.ID), "its registration unparks %d", dispatch.UnparkTasks)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{})
	require.NoError(t, reaper.Sweep(ctx))
	require.Zero(t, parked(gpu.ID), "the reaper's sweep the rest")
	leased := e.lease(gpuAgent, 5)
	require.Len(t, leased, 5)
	for _, lt := range leased {
		require.Equal(t, gpu.ID, lt.JobID)
	}
}
