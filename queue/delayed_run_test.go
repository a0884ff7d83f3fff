package queue_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestCancelByOneKeyKeepsItsPlan: cancels of one key each cancel their run
// and, from the sixth on, use the plan Postgres keeps for the statement
// instead of planning every call (pg_prepared_statements counts the plans
// of the one connection's statements); cancels of several keys at once
// cancel each pending one and leave out a key that names none.
func TestCancelByOneKeyKeepsItsPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, err := db.OpenPool(ctx, dbtest.NewURL(t), db.PoolSize{MaxConns: 1})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	job, err := queue.NewJobService(pool, nil).Create(ctx, newJob(nil))
	require.NoError(t, err)
	_, key, err := queue.NewKeyService(pool).Create(ctx, "shop", []string{queue.ScopeSubmit}, queue.KeyLimits{})
	require.NoError(t, err)
	execs := queue.NewExecutionService(pool, nil, nil)

	// Enough runs that a plan for any number of keys is costed above one
	// for a single key (with 2,000 the two cost the same, and the array
	// statement too kept its plan).
	const runs = 20_000
	reqs := make([]*queue.DelayedRunRequest, runs)
	for i := range reqs {
		reqs[i] = &queue.DelayedRunRequest{RunAt: time.Now().Add(time.Hour), TriggerRequest: &queue.TriggerRequest{
			JobID: job.ID, APIKeyID: key.ID, IdempotencyKey: fmt.Sprintf("order-%d", i), RequestHash: []byte{byte(i)}, Method: "POST",
			Path: "/v1/runs/batch"}}
	}
	scheduled, err := execs.ScheduleBatch(ctx, reqs)
	require.NoError(t, err)

	const single = 10
	for i := range single {
		out, err := execs.CancelRunsByKey(ctx, key.ID, []string{fmt.Sprintf("order-%d", i)}, "paid")
		require.NoError(t, err)
		require.Equal(t, []queue.RunCancelOutcome{{Key: fmt.Sprintf("order-%d", i), ID: scheduled[i].ID, State: queue.RunCancelled}}, out)
	}
	var generic, custom int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT generic_plans, custom_plans FROM pg_prepared_statements
		WHERE statement LIKE '-- name: DelayedRunCancelByKey%'`).Scan(&generic, &custom))
	require.Equal(t, int64(single-5), generic, "the kept plan, from the sixth call on")
	require.Equal(t, int64(5), custom, "planned for its values only while Postgres compares")

	keys := []string{fmt.Sprintf("order-%d", runs-2), "order-0", "unknown", fmt.Sprintf("order-%d", runs-1)}
	out, err := execs.CancelRunsByKey(ctx, key.ID, keys, "paid")
	require.NoError(t, err)
	require.Equal(t, []queue.RunCancelOutcome{
		{Key: keys[0], ID: scheduled[runs-2].ID, State: queue.RunCancelled},
		{Key: "order-0", ID: scheduled[0].ID, State: queue.RunCancelled}, // before: cancelled already
		{Key: "unknown", State: queue.RunNotFound},
		{Key: keys[3], ID: scheduled[runs-1].ID, State: queue.RunCancelled},
	}, out)
	var left int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM ax.delayed_run WHERE cancelled_at IS NULL").Scan(&left))
	require.Equal(t, runs-single-2, left, "the others wait")
	var reasons []string
	rows, err := pool.Query(ctx, "SELECT DISTINCT cancel_reason FROM ax.delayed_run WHERE cancelled_at IS NOT NULL")
	require.NoError(t, err)
	for rows.Next() {
		var r string
		require.NoError(t, rows.Scan(&r))
		reasons = append(reasons, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, "paid", strings.Join(reasons, ","))
}
