package routing

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// Request is one routing decision. Everything random or stateful comes in
// with it, so Pick is a pure function that tests can replay.
type Request struct {
	// Strategy selects the rule; see the Strategy constants.
	Strategy Strategy
	// Key is the route key of consistent_hash and load_aware, such as
	// "customer_id=9527"; the other strategies ignore it. The empty string
	// is a key like any other.
	Key string
	// Seq is the job's round-robin counter: the caller persists it and
	// increments it once per task.
	Seq uint64
	// Rand is a uniformly random value from the caller (rand.Uint64()) used
	// by random and weighted.
	Rand uint64
}

// Pool is a snapshot of one job's candidate agents, sorted by ID, for a
// batch of decisions. Building one costs O(N log N); after that round_robin,
// random, failover and (with a Ring) consistent_hash and load_aware decide
// in constant time, weighted in O(log N) and least_active in O(N).
//
// A Pool is not safe for concurrent use: Assigned updates it.
type Pool struct {
	agents       []Agent  // sorted by ID, unique, normalized
	healthy      []int32  // indices into agents of the healthy ones, in ID order
	healthySeeds []uint64 // hashString of each healthy agent's ID, parallel to healthy
	cumWeight    []int64  // running sum of Weight over healthy
	ring         *Ring    // nil unless it covers every healthy agent
	fromRing     []int32  // ring member index → agents index, or -1
	threshold    float64
	slots        int
}

// NewPool snapshots agents (the slice is copied, not kept). ring may be nil
// or the Ring of any membership: it only speeds up keyed decisions and is
// used when it contains every healthy agent and was built with the same
// Slots. Otherwise keyed decisions score every healthy agent, and give the
// same answers. Extra ring members that are absent or unhealthy are fine:
// their keys go to the runner-up, as if the ring had been rebuilt without
// them. When an agent joins, rebuild the ring.
func (r *Router) NewPool(agents []Agent, ring *Ring) *Pool {
	p := &Pool{agents: sortedAgents(agents), threshold: r.config.LoadThreshold, slots: r.config.Slots}
	p.indexHealthy()
	p.attach(ring)
	return p
}

// sortedAgents copies and normalizes agents, sorted by ID; of duplicate
// IDs the first one given wins. It sorts indices rather than the wide
// Agent values, and skips sorting input that is already in ID order (rows
// read ORDER BY id).
func sortedAgents(agents []Agent) []Agent {
	order := make([]int32, len(agents))
	for i := range order {
		order[i] = int32(i)
	}
	byID := func(i, j int32) int {
		return cmp.Or(strings.Compare(agents[i].ID, agents[j].ID), cmp.Compare(i, j))
	}
	if !slices.IsSortedFunc(order, byID) {
		slices.SortFunc(order, byID)
	}
	out := make([]Agent, 0, len(agents))
	for _, i := range order {
		if n := len(out); n > 0 && out[n-1].ID == agents[i].ID {
			continue
		}
		out = append(out, agents[i].normalized())
	}
	return out
}

func (p *Pool) indexHealthy() {
	var total int64
	for i := range p.agents {
		a := &p.agents[i]
		if !a.Healthy {
			continue
		}
		total += int64(a.Weight)
		p.healthy = append(p.healthy, int32(i))
		p.healthySeeds = append(p.healthySeeds, hashString(a.ID))
		p.cumWeight = append(p.cumWeight, total)
	}
}

// attach maps ring members onto the pool by merging the two sorted ID
// lists, and keeps the ring only if no healthy agent is missing from it.
func (p *Pool) attach(ring *Ring) {
	if ring == nil || ring.slots != p.slots {
		return
	}
	from := make([]int32, len(ring.ids))
	covered, i := 0, 0
	for k, id := range ring.ids {
		for i < len(p.agents) && p.agents[i].ID < id {
			i++
		}
		from[k] = -1
		if i < len(p.agents) && p.agents[i].ID == id {
			from[k] = int32(i)
			if p.agents[i].Healthy {
				covered++
			}
		}
	}
	if covered == len(p.healthy) {
		p.ring, p.fromRing = ring, from
	}
}

// Pick returns the preferred agent's ID for one task, or false when no
// agent is healthy. It also returns false for StrategyBroadcast, which has
// no single preferred agent (use Broadcast), and for unknown strategies
// (validate them with ParseStrategy where they enter the system).
func (p *Pool) Pick(req Request) (string, bool) {
	if len(p.healthy) == 0 {
		return "", false
	}
	var i int32
	switch req.Strategy {
	case StrategyRoundRobin:
		i = p.healthy[req.Seq%uint64(len(p.healthy))]
	case StrategyRandom:
		i = p.healthy[bounded(req.Rand, len(p.healthy))]
	case StrategyWeighted:
		i = p.weighted(req.Rand)
	case StrategyLeastActive:
		i = p.leastActive()
	case StrategyConsistentHash:
		i = p.consistentHash(req.Key)
	case StrategyLoadAware:
		i = p.loadAware(req.Key)
	case StrategyFailover:
		i = p.healthy[0]
	default:
		return "", false
	}
	return p.agents[i].ID, true
}

// Broadcast returns the IDs of the healthy agents, sorted: a broadcast job
// runs one task on each.
func (p *Pool) Broadcast() []string {
	ids := make([]string, len(p.healthy))
	for k, i := range p.healthy {
		ids[k] = p.agents[i].ID
	}
	return ids
}

// Assigned counts one more running task on agent id, so the following
// least_active and load_aware decisions of the batch spread out instead of
// piling onto the agent that looked idlest. It reports false for an agent
// not in the pool.
func (p *Pool) Assigned(id string) bool {
	i, ok := slices.BinarySearchFunc(p.agents, id, func(a Agent, id string) int {
		return strings.Compare(a.ID, id)
	})
	if ok {
		p.agents[i].Running++
	}
	return ok
}

// weighted draws a point in [0, total weight) and returns the healthy agent
// whose cumulative-weight interval holds it.
func (p *Pool) weighted(r uint64) int32 {
	total := p.cumWeight[len(p.cumWeight)-1]
	point := int64(bounded(r, int(total)))
	k, _ := slices.BinarySearch(p.cumWeight, point+1)
	return p.healthy[k]
}

// leastActive scans the healthy agents in ID order, so among equals the
// lowest ID wins.
func (p *Pool) leastActive() int32 {
	avg := p.averageDuration()
	best := p.healthy[0]
	for _, i := range p.healthy[1:] {
		if p.agents[i].lessActive(&p.agents[best], avg) {
			best = i
		}
	}
	return best
}

// averageDuration is the mean of the known AvgDurations of the healthy
// agents, or 0 when none is known (then durations do not break ties).
func (p *Pool) averageDuration() time.Duration {
	var sum time.Duration
	known := 0
	for _, i := range p.healthy {
		if d := p.agents[i].AvgDuration; d > 0 {
			sum += d
			known++
		}
	}
	if known == 0 {
		return 0
	}
	return sum / time.Duration(known)
}
