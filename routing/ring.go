package routing

import (
	"slices"
)

// Ring is the consistent-hash table of one membership: a circle cut into
// Config.Slots equal slots, each owned by the agent that wins rendezvous
// (highest random weight) hashing for that slot. A key hashes to a slot and
// belongs to the slot's owner.
//
// Why this shape rather than a ring of random virtual-node points: an agent's
// share is its number of equal slots, which varies by about sqrt(N/Slots)
// (1.2% for 10 agents with the default 65,536 slots) instead of 1/sqrt(V) for
// V random points per agent (7% at V = 200), and a lookup is one hash and one
// array read. Rendezvous keeps the consistency guarantees: removing an agent
// hands each of its slots to that slot's runner-up and touches no other slot,
// and adding it back restores the previous table exactly, because each slot's
// owner depends only on the set of member IDs, never on their order or on
// history. Ties between equal scores go to the lower ID.
//
// A Ring is immutable and safe for concurrent use. Building one costs
// Slots × members score computations (about 0.1 s for 1,000 agents with the
// defaults), so build it when membership changes, not per decision.
type Ring struct {
	ids    []string // sorted, unique
	seeds  []uint64 // hashString(ids[i])
	owners []uint32 // slot → index into ids
	slots  int
}

func newRing(ids []string, slots int) *Ring {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	r := &Ring{ids: ids, seeds: agentSeeds(ids), slots: slots}
	if len(ids) > 0 {
		r.owners = make([]uint32, slots)
		for s := range r.owners {
			r.owners[s] = uint32(rendezvous(slotHash(s), r.seeds))
		}
	}
	return r
}

// Owner returns the agent that owns key, or false for an empty Ring. It
// ignores health: Pool.Pick is the decision that skips unhealthy agents.
func (r *Ring) Owner(key string) (string, bool) {
	if len(r.ids) == 0 {
		return "", false
	}
	return r.ids[r.owners[keySlot(key, r.slots)]], true
}

// Members returns the ring's agent IDs, sorted and without duplicates.
func (r *Ring) Members() []string {
	return slices.Clone(r.ids)
}

// keySlot is the slot a route key falls in.
func keySlot(key string, slots int) int {
	return bounded(hashString(key), slots)
}

// agentSeeds hashes each agent ID once so scoring a slot is one mix per
// agent.
func agentSeeds(ids []string) []uint64 {
	seeds := make([]uint64, len(ids))
	for i, id := range ids {
		seeds[i] = hashString(id)
	}
	return seeds
}

// rendezvous returns the index of the highest score for slotSeed among
// seeds (which must not be empty); on equal scores the earlier index wins.
func rendezvous(slotSeed uint64, seeds []uint64) int {
	best, top := 0, score(slotSeed, seeds[0])
	for i := 1; i < len(seeds); i++ {
		if s := score(slotSeed, seeds[i]); s > top {
			best, top = i, s
		}
	}
	return best
}
