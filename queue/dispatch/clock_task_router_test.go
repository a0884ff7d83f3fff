package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/dispatch"
)

// An agent silent for longer than the liveness window, by the clock, is
// no routing candidate: round robin spreads a job's runs over the agents
// that heartbeated and never picks the silent one.
func TestRouterSkipsAgentsSilentByTheClock(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{Clock: e.clock}, nil, nil)
	require.NoError(t, err)
	e.router = router
	silent, alive1, alive2 := e.agent("silent"), e.agent("alive1"), e.agent("alive2")
	live := 2 * e.broker.Config().HeartbeatInterval

	e.clock.Advance(live + time.Second)
	e.heartbeat(alive1)
	e.heartbeat(alive2)
	job := e.job(1, 0)
	picked := map[uuid.UUID]int{}
	for range 6 {
		task := e.fire(job)
		var preferred uuid.UUID
		require.NoError(t, e.pool.QueryRow(context.Background(),
			"SELECT preferred_agent_id FROM ax.all_tasks WHERE id = $1", task.ID).Scan(&preferred))
		picked[preferred]++
	}
	require.Zero(t, picked[silent.ID], "silent for longer than %s", live)
	require.Equal(t, map[uuid.UUID]int{alive1.ID: 3, alive2.ID: 3}, picked)
}
