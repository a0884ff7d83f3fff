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
