package routing

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
)

// testIDs returns n UUID-shaped agent IDs drawn from seed, so every test
// sees the same "random" membership.
func testIDs(seed uint64, n int) []string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x",
			r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff, r.Uint32()&0x3fff|0x8000, r.Uint64()&0xffffffffffff)
	}
	return ids
}

// customerKeys are the route keys customer_id=1 … customer_id=100000: long
// shared prefixes, sequential suffixes, the case a weak hash clusters.
var customerKeys = sync.OnceValue(func() []string {
	keys := make([]string, 100_000)
	for i := range keys {
		keys[i] = fmt.Sprintf("customer_id=%d", i+1)
	}
	return keys
})

// ringOwners returns each key's owner on ring.
func ringOwners(ring *Ring, keys []string) []string {
	owners := make([]string, len(keys))
	for i, key := range keys {
		owners[i], _ = ring.Owner(key)
	}
	return owners
}

// shares returns each member's fraction of owners.
func shares(owners []string) map[string]float64 {
	counts := map[string]float64{}
	for _, owner := range owners {
		counts[owner]++
	}
	for id := range counts {
		counts[id] /= float64(len(owners))
	}
	return counts
}

// without returns ids minus the one at index i.
func without(ids []string, i int) []string {
	return slices.Delete(slices.Clone(ids), i, i+1)
}

// healthyAgents returns one healthy, idle agent per id with capacity 10.
func healthyAgents(ids ...string) []Agent {
	agents := make([]Agent, len(ids))
	for i, id := range ids {
		agents[i] = Agent{ID: id, Weight: 1, Capacity: 10, Healthy: true}
	}
	return agents
}

// mustRouter returns a Router for config or panics: configs in tests are
// literals known to be valid.
func mustRouter(config *Config) *Router {
	r, err := NewRouter(config)
	if err != nil {
		panic(err)
	}
	return r
}
