package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// Polls due at the same time are served by coalesced leases: 30 agents
// asking at once each get their task, every task once, in a few lease
// statements, not one transaction per agent.
func TestDuePollsShareOneLease(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	cfg := e.pool.Config().Copy()
	statements := &statementCounter{n: map[string]int{}}
	cfg.ConnConfig.Tracer = statements
	traced, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer traced.Close()
	broker := dispatch.NewLeaseBroker(traced, nil, e.cfg, nil, nil)

	const n = 30
	agents := make([]*db.Agent, n)
	for i := range agents {
		agents[i] = e.agent(nil, nil)
	}
	j := e.job(func(j *db.Job) { j.ShardCount = n })
	e.trigger(j.ID)

	got := make([][]*db.LeasedTask, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() {
			<-start
			tasks, err := broker.Lease(ctx, a, 1, 0)
			require.NoError(t, err)
			got[i] = tasks
		})
	}
	close(start)
	wg.Wait()
	seen := map[uuid.UUID]bool{}
	for i, tasks := range got {
		require.Len(t, tasks, 1, "agent %d gets one task", i)
		require.False(t, seen[tasks[0].ID], "task %s leased twice", tasks[0].ID)
		seen[tasks[0].ID] = true
		require.Equal(t, agents[i].ID, e.agentOf(tasks[0].ID), "the task is leased to the agent it was handed to")
	}
	leases := statements.count("TaskLeaseTake")
	require.LessOrEqual(t, leases, n/3, "lease statements for %d polls", n)
	t.Logf("%d polls served by %d lease statements", n, leases)
}

// statementCounter counts the sqlc statements a pool runs, by name.
type statementCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if rest, ok := strings.CutPrefix(data.SQL, "-- name: "); ok {
		name, _, _ := strings.Cut(rest, " ")
		c.mu.Lock()
		c.n[name]++
		c.mu.Unlock()
	}
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}
