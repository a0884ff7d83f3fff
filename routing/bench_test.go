package routing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchAgents returns n healthy agents with varied weights, loads and
// durations; every load is under the default threshold, so load_aware
// stays on its fast path unless a benchmark overloads them.
func benchAgents(n int) []Agent {
	r := rand.New(rand.NewPCG(11, 12))
	agents := make([]Agent, n)
	for i, id := range testIDs(11, n) {
		agents[i] = Agent{
			ID: id, Weight: 1 + r.IntN(4), Capacity: 10, Running: r.IntN(8),
			Load:        0.7 * r.Float64(),
			AvgDuration: time.Duration(r.IntN(1000)) * time.Millisecond, Healthy: true,
		}
	}
	return agents
}

// BenchmarkRoute measures one routing decision among 1,000 agents per
// strategy, with the Ring and Pool built outside the timed loop, as a lease
// round would. consistent_hash/no_ring and load_aware/all_overloaded show
// the O(N) paths: no usable ring, and every agent above the threshold.
func BenchmarkRoute(b *testing.B) {
	const agents = 1000
	all := benchAgents(agents)
	overloaded := benchAgents(agents)
	for i := range overloaded {
		overloaded[i].Load = 0.9
	}
	ring := defaultRouter.NewRing(ringIDs(all))
	keys, rands := customerKeys()[:4096], benchRands(4096)

	tests := []struct {
		name     string
		strategy Strategy
		pool     *Pool
	}{
		{"round_robin", StrategyRoundRobin, defaultRouter.NewPool(all, ring)},
		{"random", StrategyRandom, defaultRouter.NewPool(all, ring)},
		{"weighted", StrategyWeighted, defaultRouter.NewPool(all, ring)},
		{"least_active", StrategyLeastActive, defaultRouter.NewPool(all, ring)},
		{"consistent_hash", StrategyConsistentHash, defaultRouter.NewPool(all, ring)},
		{"consistent_hash/no_ring", StrategyConsistentHash, defaultRouter.NewPool(all, nil)},
		{"load_aware", StrategyLoadAware, defaultRouter.NewPool(all, ring)},
		{"load_aware/all_overloaded", StrategyLoadAware, defaultRouter.NewPool(overloaded, ring)},
		{"failover", StrategyFailover, defaultRouter.NewPool(all, ring)},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				k := i & 4095
				tt.pool.Pick(Request{Strategy: tt.strategy, Key: keys[k], Seq: uint64(i), Rand: rands[k]})
				i++
			}
		})
	}
	b.Run("broadcast", func(b *testing.B) {
		pool := defaultRouter.NewPool(all, ring)
		for b.Loop() {
			pool.Broadcast()
		}
	})
}

// BenchmarkRingBuild measures building the consistent-hash table, paid once
// per membership change.
func BenchmarkRingBuild(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("agents=%d", n), func(b *testing.B) {
			ids := testIDs(5, n)
			for b.Loop() {
				defaultRouter.NewRing(ids)
			}
		})
	}
}

// BenchmarkPoolBuild measures the per-lease-round snapshot of 1,000 agents
// (sort, index, map onto the ring), from rows in ID order and shuffled.
func BenchmarkPoolBuild(b *testing.B) {
	sorted := benchAgents(1000)
	slices.SortFunc(sorted, func(a, b Agent) int { return strings.Compare(a.ID, b.ID) })
	shuffled := slices.Clone(sorted)
	rand.New(rand.NewPCG(1, 1)).Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	ring := defaultRouter.NewRing(ringIDs(sorted))
	for _, tt := range []struct {
		name   string
		agents []Agent
	}{{"sorted", sorted}, {"shuffled", shuffled}} {
		b.Run(tt.name, func(b *testing.B) {
			for b.Loop() {
				defaultRouter.NewPool(tt.agents, ring)
			}
		})
	}
}

func ringIDs(agents []Agent) []string {
	ids := make([]string, len(agents))
	for i, a := range agents {
		ids[i] = a.ID
	}
	return ids
}

func benchRands(n int) []uint64 {
	r := rand.New(rand.NewPCG(3, 4))
	out := make([]uint64, n)
	for i := range out {
		out[i] = r.Uint64()
	}
	return out
}
