package dispatch_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// TestLeaseKeyedGroupOfMixedLimits: jobs of different limits share a
// group's key, and each task is held to its own limit against all the
// key's running tasks: with 1 running, a task of limit 1 waits while one
// of limit 3 is leased; with 2 running, one of limit 2 waits while one of
// limit 3 is leased; with 3 running, every task waits.
func TestLeaseKeyedGroupOfMixedLimits(t *testing.T) {
	t.Parallel()
	f := newKeyedFixture(t)
	ctx := context.Background()
	task := func(limit int) uuid.UUID { return f.tasks(f.pool, "customer=acme", limit, 1)[0] }
	lease := func() []uuid.UUID { return leasedIDs(f.lease()) }
	require.Equal(t, []uuid.UUID{task(3)}, lease())
	one := task(1)
	require.Equal(t, []uuid.UUID{task(3)}, lease(), "1 running: the task of limit 1 waits")
	two := task(2)
	require.Equal(t, []uuid.UUID{task(3)}, lease(), "2 running: the task of limit 2 waits")
	task(3)
	require.Empty(t, lease(), "3 running: every task waits")
	var pending int
	require.NoError(t, f.pool.QueryRow(ctx, `SELECT count(*) FROM ax.task WHERE id = ANY($1) AND state = 'pending'`,
		[]uuid.UUID{one, two}).Scan(&pending))
	require.Equal(t, 2, pending)
}

// TestAConcurrencyGroupCountsWithinItsJobGroup: jobs of two job groups
// (two teams) name the same concurrency group and key. Team a's job, at a
// limit of 3, runs 3 tasks; team b's task, at a limit of 1, is leased
// all the same: the group counts within its job group. Before, team a
// held team b's key (its running tasks counted against b's limit of 1),
// and b's task waited for as long as a's ran.
func TestAConcurrencyGroupCountsWithinItsJobGroup(t *testing.T) {
	e := setup(t, nil)
	a := e.agent(nil, nil)
	job := func(group string, limit, shards int) *axtype.Job {
		return e.job(func(j *axtype.Job) {
			j.Group, j.ShardCount = group, shards
			j.ConcurrencyKey, j.ConcurrencyLimit, j.ConcurrencyGroup = "customer=acme", limit, "exports"
		})
	}
	hog, other := job("team-a", 3, 3), job("team-b", 1, 1)
	e.trigger(hog.ID)
	require.Len(t, e.lease(a, 10), 3)
	run := e.trigger(other.ID)
	leased := e.lease(a, 10)
	require.Len(t, leased, 1, "team b's task is not held by team a's")
	require.Equal(t, run.ID, leased[0].ExecutionID)
	var scopes []string
	rows, err := e.pool.Query(context.Background(), `SELECT DISTINCT concurrency_scope FROM ax.task ORDER BY 1`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		scopes = append(scopes, s)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"group:team-a/exports", "group:team-b/exports"}, scopes)
}
