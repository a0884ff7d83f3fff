package routing

// The keyed strategies share one preference order per key: the key's slot
// ranks agents by rendezvous score, highest first. consistent_hash takes the
// first healthy agent in that order, load_aware the first healthy one that
// is not overloaded.

// consistentHash returns the key's owner among the healthy agents: the ring
// owner when it is usable, else the rendezvous winner among the healthy
// agents, which is the same agent a ring of only those agents would name.
func (p *Pool) consistentHash(key string) int32 {
	slot := keySlot(key, p.slots)
	if i := p.ringOwner(slot); i >= 0 {
		return i
	}
	return p.healthy[rendezvous(slotHash(slot), p.healthySeeds)]
}

// loadAware keeps the key on its owner unless the owner's load is above the
// threshold; then it walks the key's preference order (see coolest).
func (p *Pool) loadAware(key string) int32 {
	slot := keySlot(key, p.slots)
	if i := p.ringOwner(slot); i >= 0 && p.agents[i].load() <= p.threshold {
		return i
	}
	return p.coolest(slotHash(slot))
}

// ringOwner returns the pool index of the slot's ring owner, or -1 when
// there is no usable ring or the owner is absent or unhealthy.
func (p *Pool) ringOwner(slot int) int32 {
	if p.ring == nil {
		return -1
	}
	i := p.fromRing[p.ring.owners[slot]]
	if i < 0 || !p.agents[i].Healthy {
		return -1
	}
	return i
}

// candidate is a healthy agent ranked for one slot.
type candidate struct {
	index int32
	load  float64
	score uint64
}

// coolest returns the first agent in the slot's preference order whose load
// is at or under the threshold; when every agent is above it, the least
// loaded, and on equal load the earlier in preference order.
func (p *Pool) coolest(slotSeed uint64) int32 {
	best := p.candidate(0, slotSeed)
	for k := 1; k < len(p.healthy); k++ {
		if c := p.candidate(k, slotSeed); c.better(best, p.threshold) {
			best = c
		}
	}
	return best.index
}

func (p *Pool) candidate(k int, slotSeed uint64) candidate {
	i := p.healthy[k]
	return candidate{index: i, load: p.agents[i].load(), score: score(slotSeed, p.healthySeeds[k])}
}

// better orders candidates for load_aware: not overloaded before
// overloaded; among the not overloaded the higher score; among the
// overloaded the lower load, then the higher score. Equal candidates keep
// the earlier one (lower ID), as rendezvous does.
func (c candidate) better(d candidate, threshold float64) bool {
	cOK, dOK := c.load <= threshold, d.load <= threshold
	switch {
	case cOK != dOK:
		return cOK
	case !cOK && c.load != d.load:
		return c.load < d.load
	}
	return c.score > d.score
}
