package dispatch_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
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
