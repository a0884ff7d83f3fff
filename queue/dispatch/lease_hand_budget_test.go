package dispatch

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// The params budgets of a lease's hand (budgets of 10 an agent and 25 a
// batch here): an agent's first task goes out whatever its params, later
// ones only within both budgets; a task past its preferred agent's
// budget goes to no one; one without params always fits.
func TestLeaseHandKeepsRunParamsWithinItsBudgets(t *testing.T) {
	agents := []axtype.LeaseAgent{{ID: uuid.New(), Max: 10}, {ID: uuid.New(), Max: 10}, {ID: uuid.New(), Max: 10}}
	h := newLeaseHand(&LeaseBatch{Agents: agents})
	h.maxParamsBytes, h.maxBatchParamsBytes = 10, 25
	group := []int{0, 1, 2}
	routed := func(agent int, bytes int) int {
		return h.handTo(group, axtype.LeaseCandidate{ID: uuid.New(), PreferredAgentID: &agents[agent].ID,
			Steal: axtype.LeaseStealNone, ParamsBytes: bytes})
	}
	anyone := func(bytes int) int {
		return h.handTo(group, axtype.LeaseCandidate{ID: uuid.New(), Steal: axtype.LeaseStealAny, ParamsBytes: bytes})
	}
	require.Equal(t, 0, routed(0, 30), "a first task, past both budgets")
	require.Equal(t, -1, routed(0, 1), "agent 0 is past its budget")
	require.Equal(t, 0, routed(0, 0), "no params")
	require.Equal(t, 1, routed(1, 6))
	require.Equal(t, -1, routed(1, 6), "6+6 > 10")
	require.Equal(t, 2, anyone(8), "agent 2's first (the batch is at 36)")
	require.Equal(t, -1, anyone(1), "the batch is past 25 for every agent's second task")
	require.Equal(t, 1, anyone(0))
}
