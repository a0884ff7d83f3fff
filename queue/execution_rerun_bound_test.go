package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// A bulk re-run stops once its re-runs made its task bound (the re-run
// that passes it is made whole) and says truncated; the same call again
// replays those and goes on. Unbounded, one call of 1,000 runs of 10,000
// shards made 10 million tasks in one request. Here 4 cancelled runs of
// 3 shards and a bound of 5: 2 re-runs (6 tasks), then the other 2. The
// re-runs the first call made, cancelled in turn, match the filter too,
// but the same call does not re-run them: that would run the same work
// twice.
func TestBulkRerunStopsAtItsTaskBound(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.ShardCount = 3 })
	for range 4 {
		_, err := e.execs.Cancel(ctx, e.trigger(job.ID).ID, "to re-run")
		require.NoError(t, err)
	}
	req := &queue.BulkRerunRequest{Filter: db.RerunCandidateParams{JobID: &job.ID,
		States: []axtype.ExecutionState{axtype.ExecutionCancelled}, Limit: 100}, RequestKey: "bound", MaxTasks: 5}
	first, err := e.execs.BulkRerun(ctx, req)
	require.NoError(t, err)
	require.Len(t, first.Items, 2)
	require.True(t, first.Truncated, "the bound stopped it")
	require.Equal(t, 6, e.count(`SELECT count(*) FROM ax.all_tasks t JOIN ax.all_executions x ON x.id = t.execution_id
		WHERE x.job_id = $1 AND x.cause = 'rerun'`, job.ID))
	for _, item := range first.Items {
		_, err := e.execs.Cancel(ctx, item.RerunID, "it fails too")
		require.NoError(t, err)
	}

	again, err := e.execs.BulkRerun(ctx, req)
	require.NoError(t, err)
	require.Len(t, again.Items, 4)
	require.False(t, again.Truncated)
	require.True(t, again.Items[0].Replayed)
	require.True(t, again.Items[1].Replayed)
	require.False(t, again.Items[2].Replayed)
	require.Equal(t, 4, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1 AND cause = 'rerun'`, job.ID))
}
