package routing

import (
	"math"
	"time"
)

// Agent is what routing knows about one candidate agent at decision time.
// The caller fills it from the agent's row and last heartbeat.
type Agent struct {
	// ID is the agent's stable identifier (a UUID string). Hashing and
	// every "sorted by ID" order use it, so it must not change across
	// restarts.
	ID string
	// Weight is the agent's relative share under the weighted strategy.
	// Values below 1 count as 1.
	Weight int
	// Capacity is how many tasks the agent runs at once. Values below 1
	// count as 1.
	Capacity int
	// Running is how many tasks the agent runs now. Negative counts as 0.
	Running int
	// Load is the agent's smoothed load from its heartbeats: the busiest
	// of running/capacity, CPU and memory use, averaged over a few minutes
	// (see dispatch.AgentConfig.LoadSmoothing), 0 to 1 and above when
	// oversubscribed. NaN counts as 0 (unknown).
	Load float64
	// AvgDuration is the agent's recent average task duration; 0 means
	// unknown, which least_active counts as the average of the known ones.
	AvgDuration time.Duration
	// Healthy is true when the agent is active, ready and not quarantined.
	// Unhealthy agents are never picked.
	Healthy bool
}

// normalized returns a with the documented floors applied.
func (a Agent) normalized() Agent {
	a.Weight = max(a.Weight, 1)
	a.Capacity = max(a.Capacity, 1)
	a.Running = max(a.Running, 0)
	a.Load = zeroIfNaN(a.Load)
	return a
}

// zeroIfNaN treats a NaN reading as unknown (0), so load comparisons stay a
// total order.
func zeroIfNaN(f float64) float64 {
	if math.IsNaN(f) {
		return 0
	}
	return f
}

// load is the busier of the agent's slot table now (Running counts the
// tasks just routed to it) and its smoothed load: full slots, a CPU or a
// memory hot for minutes each make it a poor place for more work.
func (a *Agent) load() float64 {
	return max(float64(a.Running)/float64(a.Capacity), a.Load)
}

// lessActive reports whether a is less busy than b for least_active: lower
// Running/Capacity first (compared exactly by cross-multiplying), then
// shorter expected duration, with unknown durations counted as avg.
func (a *Agent) lessActive(b *Agent, avg time.Duration) bool {
	x, y := int64(a.Running)*int64(b.Capacity), int64(b.Running)*int64(a.Capacity)
	if x != y {
		return x < y
	}
	return durationOr(a.AvgDuration, avg) < durationOr(b.AvgDuration, avg)
}

func durationOr(d, unknown time.Duration) time.Duration {
	if d <= 0 {
		return unknown
	}
	return d
}
