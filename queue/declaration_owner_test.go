package queue_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestDeclarationSetOwnersMigrated (issue 36 item 3, migration 00046):
// sets applied before owners existed belong to their jobs' groups (a set
// whose jobs span groups to all of them), a set without jobs stays
// unowned; afterwards a key limited to some of a set's groups may not
// change it, and one of all its groups may.
func TestDeclarationSetOwnersMigrated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.NewBlank(t)
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()
	_, err = m.Up(ctx)
	require.NoError(t, err)

	decls := queue.NewDeclarationService(pool, nil, nil)
	inGroup := func(group string) *axtype.Job { return newJob(func(j *axtype.Job) { j.Group = group }) }
	_, err = decls.Apply(ctx, &queue.Declaration{ManagedBy: "sdk:mixed", Version: "1",
		Jobs: []*axtype.Job{inGroup("teamA"), inGroup("teamB")}})
	require.NoError(t, err)
	_, err = decls.Apply(ctx, &queue.Declaration{ManagedBy: "sdk:solo", Version: "1", Jobs: []*axtype.Job{inGroup("teamB")}})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, "INSERT INTO ax.declaration_set (managed_by) VALUES ('sdk:none')")
	require.NoError(t, err)

	// Back to before 00046 (and whatever follows it), then up again.
	hasOwners := func() bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM information_schema.columns
			WHERE table_schema = 'ax' AND table_name = 'declaration_set' AND column_name = 'owned'`).Scan(&n))
		return n == 1
	}
	for hasOwners() {
		_, err := m.Down(ctx)
		require.NoError(t, err)
	}
	_, err = m.Up(ctx)
	require.NoError(t, err)

	sets, err := decls.Sets(ctx, nil)
	require.NoError(t, err)
	owners := map[string][]string{}
	for _, s := range sets {
		if s.Owned {
			owners[s.ManagedBy] = s.OwnerGroups
		}
	}
	require.Equal(t, map[string][]string{"sdk:mixed": {"teamA", "teamB"}, "sdk:solo": {"teamB"}}, owners)

	var forbidden *queue.DeclarationForbiddenError
	_, err = decls.Apply(ctx, &queue.Declaration{ManagedBy: "sdk:mixed", Version: "2", Groups: []string{"teamA"},
		Jobs: []*axtype.Job{inGroup("teamA")}})
	require.ErrorAs(t, err, &forbidden)
	_, err = decls.Apply(ctx, &queue.Declaration{ManagedBy: "sdk:mixed", Version: "2", Groups: []string{"teamA", "teamB"}})
	require.NoError(t, err)
	_, err = decls.Apply(ctx, &queue.Declaration{ManagedBy: "sdk:none", Version: "1", Groups: []string{"teamA"}})
	require.NoError(t, err, "a set without jobs or owner is anyone's")
	set, err := decls.Sets(ctx, []string{"teamA"})
	require.NoError(t, err)
	require.Len(t, set, 1)
	require.Equal(t, "sdk:none", set[0].ManagedBy)
	require.Equal(t, []string{"teamA"}, set[0].OwnerGroups)
}
