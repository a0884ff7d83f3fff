package routing

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRingSpread checks the default settings against the goal: with 3, 5 and
// 10 agents each agent owns between 0.9 and 1.1 of its fair share of
// customer_id=1…100000. Eight memberships per size show it is not one lucky
// set of IDs.
func TestRingSpread(t *testing.T) {
	t.Parallel()
	tests := []struct{ agents int }{{3}, {5}, {10}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("agents=%d", tt.agents), func(t *testing.T) {
			t.Parallel()
			keys, fair, worst := customerKeys(), 1/float64(tt.agents), 0.0
			for seed := range uint64(8) {
				ids := testIDs(seed, tt.agents)
				got := shares(ringOwners(NewRing(ids), keys))
				require.Len(t, got, tt.agents)
				for id, share := range got {
					require.InDelta(t, fair, share, 0.1*fair, "agent %s of membership %d", id, seed)
					worst = max(worst, math.Abs(share/fair-1))
				}
			}
			t.Logf("agents=%d: worst share is %.2f%% off fair", tt.agents, 100*worst)
		})
	}
}

// TestRingRemoveAndRestore removes each agent in turn: only its keys move
// (at most 1/N + 2% of all keys), and adding it back restores the original
// assignment exactly.
func TestRingRemoveAndRestore(t *testing.T) {
	t.Parallel()
	tests := []struct{ agents int }{{3}, {5}, {10}}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("agents=%d", tt.agents), func(t *testing.T) {
			t.Parallel()
			keys, ids := customerKeys(), testIDs(42, tt.agents)
			before, worst := ringOwners(NewRing(ids), keys), 0.0
			for i, removed := range ids {
				after := ringOwners(NewRing(without(ids, i)), keys)
				moved := 0
				for k := range keys {
					if after[k] != before[k] {
						require.Equal(t, removed, before[k], "key %s moved off a surviving agent", keys[k])
						moved++
					}
				}
				fraction := float64(moved) / float64(len(keys))
				require.LessOrEqual(t, fraction, 1/float64(tt.agents)+0.02)
				worst = max(worst, fraction)

				readded := append(without(ids, i), removed)
				require.Equal(t, before, ringOwners(NewRing(readded), keys), "re-adding %s", removed)
			}
			t.Logf("agents=%d: at most %.2f%% of keys moved (1/N = %.2f%%)", tt.agents, 100*worst, 100/float64(tt.agents))
		})
	}
}

// TestRingMembership checks that a ring depends only on the set of IDs.
func TestRingMembership(t *testing.T) {
	t.Parallel()
	ids := testIDs(7, 5)
	keys := customerKeys()[:10_000]
	want := ringOwners(NewRing(ids), keys)
	shuffled := append(slices.Clone(ids), ids[3], ids[0])
	slices.Reverse(shuffled)

	ring := NewRing(shuffled)
	require.Equal(t, want, ringOwners(ring, keys))
	require.True(t, slices.IsSorted(ring.Members()))
	require.ElementsMatch(t, ids, ring.Members())

	_, ok := NewRing(nil).Owner("customer_id=1")
	require.False(t, ok)
}

// TestPoolMatchesRemovedRing shows the pool's answers when an agent is
// unhealthy equal the answers of a ring rebuilt without it, whether the pool
// uses a ring (stale or not) or scores agents directly.
func TestPoolMatchesRemovedRing(t *testing.T) {
	t.Parallel()
	ids := testIDs(3, 6)
	keys := customerKeys()[:5_000]
	agents := healthyAgents(ids...)
	agents[2].Healthy = false
	want := ringOwners(NewRing(without(ids, 2)), keys)

	tests := []struct {
		name     string
		ring     *Ring
		attached bool
	}{
		{name: "ring of all agents", ring: NewRing(ids), attached: true},
		{name: "ring with an extra member", ring: NewRing(append(slices.Clone(ids), "zz-gone")), attached: true},
		{name: "ring missing a healthy agent", ring: NewRing(without(ids, 4)), attached: false},
		{name: "ring with other slots", ring: mustRouter(&Config{Slots: 1024}).NewRing(ids), attached: false},
		{name: "no ring", ring: nil, attached: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pool := defaultRouter.NewPool(agents, tt.ring)
			require.Equal(t, tt.attached, pool.ring != nil)
			for k, key := range keys {
				got, ok := pool.Pick(Request{Strategy: StrategyConsistentHash, Key: key})
				require.True(t, ok)
				require.Equal(t, want[k], got, "key %s", key)
			}
		})
	}
}

// TestHashString checks the properties the ring relies on.
func TestHashString(t *testing.T) {
	t.Parallel()
	seen := map[uint64]string{}
	for _, key := range customerKeys() {
		h := hashString(key)
		other, collides := seen[h]
		require.False(t, collides, "%s collides with %s", key, other)
		seen[h] = key
	}
	tests := []struct{ a, b string }{
		{"", "\x00"},
		{"ab", "ab\x00"},
		{"12345678", "123456781"},
		{"customer_id=1", "customer_id=2"},
	}
	for _, tt := range tests {
		require.NotEqual(t, hashString(tt.a), hashString(tt.b), "%q vs %q", tt.a, tt.b)
	}
	require.Equal(t, uint64(0x0807060504030201), le64("\x01\x02\x03\x04\x05\x06\x07\x08"))
	require.Equal(t, uint64(0x030201), tail64("\x01\x02\x03"))
}
