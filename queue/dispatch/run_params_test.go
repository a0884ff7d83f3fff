package dispatch_test

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// TestARunsParamsAreReadOnceForAllItsShards: a run of 1,000 shards with
// params of 200 KiB, its tasks' concurrency key a template over them.
// Each planned task brought its own copy of the params from the database
// and decoded it for its key: 200 MB read and decoded for one fire (2.5
// GB at the limits, 10,000 shards of 256 KiB). The fire, and a re-run of
// the shards that did not succeed (its first row not shard 0), now read
// and decode them once; every task still gets its key.
func TestARunsParamsAreReadOnceForAllItsShards(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	params, err := json.Marshal(map[string]any{"customer": "acme", "pad": strings.Repeat("x", 200<<10)})
	require.NoError(t, err)
	const shards = 1000
	job := testfactory.Job(ctx, t, pool, &testfactory.JobOpts{Edit: func(j *axtype.Job) {
		j.ShardCount, j.Params = shards, params
		j.ConcurrencyKey, j.ConcurrencyLimit = "customer={{.params.customer}}", 5
	}})
	allocated := func(do func()) uint64 {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		do()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	keyed := func(run uuid.UUID) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM ax.task
			WHERE execution_id = $1 AND concurrency_key = 'customer=acme'`, run).Scan(&n))
		return n
	}
	const most = 64 << 20 // tests running beside this one allocate too

	run := uuid.Must(uuid.NewV7())
	bytes := allocated(func() {
		inserted, err := dispatch.InsertExecutions(ctx, pool, nil, nil, []*axtype.NewExecution{{ID: run, JobID: job.ID,
			Cause: axtype.CauseManual, ScheduledFor: time.Now()}}, nil)
		require.NoError(t, err)
		require.Len(t, inserted, 1)
	})
	require.Less(t, bytes, uint64(most), "the fire allocated %d MiB", bytes>>20)
	t.Logf("the fire allocated %d MiB", bytes>>20)
	require.Equal(t, shards, keyed(run))

	_, err = pool.Exec(ctx, `UPDATE ax.task SET state = 'succeeded' WHERE execution_id = $1 AND shard_index < 10`, run)
	require.NoError(t, err)
	rerun := uuid.Must(uuid.NewV7())
	bytes = allocated(func() {
		tasks, err := db.ExecutionRerunInsert(ctx, pool, &db.NewRerun{ID: rerun, RerunOf: run, Shards: axtype.RerunFailed},
			(*dispatch.TaskRouter)(nil).RouteFunc(pool))
		require.NoError(t, err)
		require.Len(t, tasks, shards-10)
	})
	require.Less(t, bytes, uint64(most), "the re-run allocated %d MiB", bytes>>20)
	t.Logf("the re-run allocated %d MiB", bytes>>20)
	require.Equal(t, shards-10, keyed(rerun))
}

// TestALeaseHandsOutRunParamsWithinItsBudget: each leased task carries
// its run's params, so one lease of 1,000 tasks of a run with params of
// 256 KiB answered 256 MB. A run of 200 shards with params of 200 KiB:
// one agent asking for 1,000 gets as many as 4 MiB of params hold (20),
// then the next 20; a batch of five agents gets 16 MiB's worth (81), at
// most 20 each; a run without params is not held back. Before, the first
// lease took all 200.
func TestALeaseHandsOutRunParamsWithinItsBudget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	params, err := json.Marshal(map[string]any{"pad": strings.Repeat("x", 200<<10)})
	require.NoError(t, err)
	big := testfactory.Job(ctx, t, pool, &testfactory.JobOpts{Edit: func(j *axtype.Job) {
		j.ShardCount, j.Params = 200, params
	}})
	small := testfactory.Job(ctx, t, pool, &testfactory.JobOpts{Edit: func(j *axtype.Job) { j.ShardCount = 30 }})
	for _, job := range []*axtype.Job{big, small} {
		_, err := dispatch.InsertExecutions(ctx, pool, nil, nil, []*axtype.NewExecution{{ID: uuid.Must(uuid.NewV7()),
			JobID: job.ID, Cause: axtype.CauseManual, ScheduledFor: time.Now()}}, nil)
		require.NoError(t, err)
	}
	var agents []axtype.LeaseAgent
	for range 5 {
		a := testfactory.Agent(ctx, t, pool, &testfactory.AgentOpts{Capacity: 1000})
		agents = append(agents, axtype.LeaseAgent{ID: a.ID, Executors: []string{"shell"}, Max: 1000})
	}
	count := func(tasks []*axtype.LeasedTask) (withParams, without int) {
		for _, task := range tasks {
			if task.JobID == big.ID {
				require.Len(t, task.Params, len(params)+1, "jsonb adds a space after the key") // {"pad": "x…"}
				withParams++
			} else {
				without++
			}
		}
		return withParams, without
	}
	lease := func(agents ...axtype.LeaseAgent) [][]*axtype.LeasedTask {
		got, err := dispatch.LeaseMany(ctx, pool, &dispatch.LeaseBatch{Agents: agents,
			Lease: time.Minute, StealAfter: time.Minute, StarveAfter: time.Hour})
		require.NoError(t, err)
		return got
	}

	withParams, without := count(lease(agents[0])[0])
	require.Equal(t, 20, withParams, "4 MiB of 200 KiB params")
	require.Equal(t, 30, without)
	withParams, _ = count(lease(agents[0])[0])
	require.Equal(t, 20, withParams)

	total := 0
	for _, got := range lease(agents...) {
		n, _ := count(got)
		require.LessOrEqual(t, n, 20)
		total += n
	}
	require.Equal(t, axtype.MaxLeaseBatchParamsBytes/(len(params)+1), total, "16 MiB a batch")
}
