package routing

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRoundRobin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		agents []Agent
		want   []string // for Seq = 0, 1, 2, …
	}{
		{name: "sorted by ID whatever the input order", agents: healthyAgents("c", "a", "b"), want: []string{"a", "b", "c", "a", "b", "c"}},
		{name: "unhealthy skipped", agents: markUnhealthy(healthyAgents("c", "a", "b"), "b"), want: []string{"a", "c", "a", "c"}},
		{name: "one agent", agents: healthyAgents("a"), want: []string{"a", "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for seq, want := range tt.want {
				got, ok := Pick(Request{Strategy: StrategyRoundRobin, Seq: uint64(seq)}, tt.agents)
				require.True(t, ok)
				require.Equal(t, want, got, "seq %d", seq)
			}
		})
	}
}

// TestRandomAndWeighted draws 10,000 picks and requires every agent's share
// within ±5% of its expected share, relative (75% ± 3.75 points, 25% ± 1.25
// points).
func TestRandomAndWeighted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		strategy Strategy
		agents   []Agent
		want     map[string]float64
	}{
		{
			name: "random is uniform", strategy: StrategyRandom,
			agents: withWeights(healthyAgents("a", "b", "c"), 5, 1, 1),
			want:   map[string]float64{"a": 1.0 / 3, "b": 1.0 / 3, "c": 1.0 / 3},
		},
		{
			name: "weighted 3:1", strategy: StrategyWeighted,
			agents: withWeights(healthyAgents("a", "b"), 3, 1),
			want:   map[string]float64{"a": 0.75, "b": 0.25},
		},
		{
			name: "weighted 1:2:1, zero weight counts as 1", strategy: StrategyWeighted,
			agents: withWeights(healthyAgents("a", "b", "c"), 0, 2, 1),
			want:   map[string]float64{"a": 0.25, "b": 0.5, "c": 0.25},
		},
		{
			name: "weighted skips an unhealthy heavy agent", strategy: StrategyWeighted,
			agents: markUnhealthy(withWeights(healthyAgents("a", "b", "c"), 1, 100, 1), "b"),
			want:   map[string]float64{"a": 0.5, "c": 0.5},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool, r := defaultRouter.NewPool(tt.agents, nil), rand.New(rand.NewPCG(1, 2))
			picks := make([]string, 10_000)
			for i := range picks {
				picks[i], _ = pool.Pick(Request{Strategy: tt.strategy, Rand: r.Uint64()})
			}
			got := shares(picks)
			require.Len(t, got, len(tt.want))
			for id, want := range tt.want {
				require.InDelta(t, want, got[id], 0.05*want, "agent %s", id)
			}
			t.Logf("%s: %v", tt.name, got)
		})
	}
}

// TestRandomEnds pins the mapping of Rand onto agents, so the same value
// always means the same agent.
func TestRandomEnds(t *testing.T) {
	t.Parallel()
	agents := withWeights(healthyAgents("a", "b", "c"), 1, 2, 1)
	tests := []struct {
		strategy Strategy
		rand     uint64
		want     string
	}{
		{StrategyRandom, 0, "a"},
		{StrategyRandom, 1 << 63, "b"},
		{StrategyRandom, math.MaxUint64, "c"},
		{StrategyWeighted, 1<<62 - 1, "a"},
		{StrategyWeighted, 1 << 62, "b"},
		{StrategyWeighted, 3<<62 - 1, "b"},
		{StrategyWeighted, 3 << 62, "c"},
		{StrategyWeighted, math.MaxUint64, "c"},
	}
	for _, tt := range tests {
		got, ok := Pick(Request{Strategy: tt.strategy, Rand: tt.rand}, agents)
		require.True(t, ok)
		require.Equal(t, tt.want, got, "%s with Rand %#x", tt.strategy, tt.rand)
	}
}

func TestLeastActive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		agents []Agent
		want   string
	}{
		{
			name:   "lowest ratio, not lowest count",
			agents: []Agent{active("a", 2, 4, 0), active("b", 3, 12, 0), active("c", 1, 1, 0)},
			want:   "b",
		},
		{
			name:   "equal ratio: shorter duration",
			agents: []Agent{active("a", 1, 2, 2*time.Second), active("b", 2, 4, time.Second)},
			want:   "b",
		},
		{
			name:   "unknown duration counts as the average of known (2s)",
			agents: []Agent{active("a", 0, 1, 0), active("b", 0, 1, 3*time.Second), active("c", 1, 1, time.Second)},
			want:   "a",
		},
		{
			name:   "unknown duration loses to a faster known one",
			agents: []Agent{active("a", 0, 1, 0), active("b", 0, 1, time.Second), active("c", 1, 1, 3*time.Second)},
			want:   "b",
		},
		{
			name:   "all equal: lowest ID",
			agents: []Agent{active("c", 1, 2, time.Second), active("b", 1, 2, time.Second), active("a", 1, 1, time.Second)},
			want:   "b",
		},
		{
			name:   "zero capacity counts as 1",
			agents: []Agent{active("a", 1, 0, 0), active("b", 1, 3, 0)},
			want:   "b",
		},
		{
			name:   "unhealthy idle agent skipped",
			agents: markUnhealthy([]Agent{active("a", 0, 1, 0), active("b", 5, 10, 0)}, "a"),
			want:   "b",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Pick(Request{Strategy: StrategyLeastActive}, tt.agents)
			require.True(t, ok)
			require.Equal(t, tt.want, got)
		})
	}
}

// TestAssigned shows a batch of least_active decisions spreading out when
// each placement is recorded.
func TestAssigned(t *testing.T) {
	t.Parallel()
	pool := defaultRouter.NewPool(healthyAgents("a", "b", "c"), nil)
	var got []string
	for range 6 {
		id, ok := pool.Pick(Request{Strategy: StrategyLeastActive})
		require.True(t, ok)
		require.True(t, pool.Assigned(id))
		got = append(got, id)
	}
	require.Equal(t, []string{"a", "b", "c", "a", "b", "c"}, got)
	require.False(t, pool.Assigned("zz"))
}

// TestLoadAware ranks three agents by the key's preference order (p0 owns
// the key) and checks where the key goes under each load pattern.
func TestLoadAware(t *testing.T) {
	t.Parallel()
	const key = "customer_id=9527"
	ids := testIDs(9, 3)
	pref := preferenceOrder(t, key, ids)

	tests := []struct {
		name      string
		threshold float64
		set       func(p []*Agent) // p in preference order
		want      int              // index into pref
	}{
		{name: "owner under threshold", set: func(p []*Agent) { p[0].Running = 7 }, want: 0},
		{name: "owner exactly at threshold stays", set: func(p []*Agent) { p[0].Running = 8 }, want: 0},
		{name: "owner slots full: next", set: func(p []*Agent) { p[0].Running = 9 }, want: 1},
		{name: "owner loaded for minutes: next", set: func(p []*Agent) { p[0].Load = 0.95 }, want: 1},
		{name: "owner oversubscribed: next", set: func(p []*Agent) { p[0].Load = 1.5 }, want: 1},
		{name: "owner and next overloaded: third", set: func(p []*Agent) { p[0].Load, p[1].Running = 0.9, 10 }, want: 2},
		{name: "next busier than third but under threshold: next", set: func(p []*Agent) { p[0].Load, p[1].Load = 0.9, 0.7 }, want: 1},
		{name: "owner unhealthy: next", set: func(p []*Agent) { p[0].Healthy = false }, want: 1},
		{name: "all overloaded: least loaded", set: func(p []*Agent) { p[0].Load, p[1].Load, p[2].Load = 0.99, 0.85, 0.9 }, want: 1},
		{name: "all overloaded equally: owner", set: func(p []*Agent) { p[0].Load, p[1].Load, p[2].Load = 0.9, 0.9, 0.9 }, want: 0},
		{name: "NaN load counts as unknown", set: func(p []*Agent) { p[0].Load = math.NaN() }, want: 0},
		{name: "threshold 0.95 keeps owner at 0.9", threshold: 0.95, set: func(p []*Agent) { p[0].Load = 0.9 }, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			router := mustRouter(&Config{LoadThreshold: tt.threshold})
			agents := healthyAgents(pref...)
			tt.set([]*Agent{&agents[0], &agents[1], &agents[2]})
			for _, ring := range []*Ring{nil, router.NewRing(ids)} {
				got, ok := router.NewPool(agents, ring).Pick(Request{Strategy: StrategyLoadAware, Key: key})
				require.True(t, ok)
				require.Equal(t, pref[tt.want], got, "with ring: %t", ring != nil)
			}
		})
	}
}

// preferenceOrder lists ids in key's consistent-hash preference order, found
// by marking each chosen agent unhealthy and asking again.
func preferenceOrder(t *testing.T, key string, ids []string) []string {
	t.Helper()
	agents := healthyAgents(ids...)
	var order []string
	for range ids {
		id, ok := Pick(Request{Strategy: StrategyConsistentHash, Key: key}, agents)
		require.True(t, ok)
		order = append(order, id)
		agents = markUnhealthy(agents, id)
	}
	return order
}

func TestFailoverAndBroadcast(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		agents    []Agent
		failover  string
		broadcast []string
	}{
		{name: "all healthy", agents: healthyAgents("c", "a", "b"), failover: "a", broadcast: []string{"a", "b", "c"}},
		{name: "first unhealthy", agents: markUnhealthy(healthyAgents("c", "a", "b"), "a"), failover: "b", broadcast: []string{"b", "c"}},
		{name: "duplicate IDs count once", agents: healthyAgents("b", "a", "b"), failover: "a", broadcast: []string{"a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Pick(Request{Strategy: StrategyFailover}, tt.agents)
			require.True(t, ok)
			require.Equal(t, tt.failover, got)
			require.Equal(t, tt.broadcast, Broadcast(tt.agents))
		})
	}
}

// TestNothingToPick covers empty and all-unhealthy pools, and requests
// that have no single preferred agent.
func TestNothingToPick(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		agents     []Agent
		strategies []Strategy
	}{
		{name: "no agents", agents: nil, strategies: Strategies()},
		{name: "no healthy agents", agents: markUnhealthy(healthyAgents("a", "b"), "a", "b"), strategies: Strategies()},
		{name: "broadcast and unknown strategies", agents: healthyAgents("a"), strategies: []Strategy{StrategyBroadcast, "", "sticky"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, strategy := range tt.strategies {
				got, ok := Pick(Request{Strategy: strategy, Key: "k", Rand: 42}, tt.agents)
				require.False(t, ok, strategy)
				require.Empty(t, got)
			}
		})
	}
	require.Empty(t, Broadcast(markUnhealthy(healthyAgents("a"), "a")))
}

func markUnhealthy(agents []Agent, ids ...string) []Agent {
	for i := range agents {
		for _, id := range ids {
			if agents[i].ID == id {
				agents[i].Healthy = false
			}
		}
	}
	return agents
}

func withWeights(agents []Agent, weights ...int) []Agent {
	for i, w := range weights {
		agents[i].Weight = w
	}
	return agents
}

func active(id string, running, capacity int, avg time.Duration) Agent {
	return Agent{ID: id, Running: running, Capacity: capacity, AvgDuration: avg, Healthy: true}
}
