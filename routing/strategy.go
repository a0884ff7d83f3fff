package routing

import "fmt"

// Strategy names how a job's tasks choose their preferred agent. The values
// are the ones stored in jobs.route_strategy and accepted by the API.
type Strategy string

const (
	// StrategyRoundRobin cycles through the healthy agents sorted by ID,
	// indexed by the request's Seq.
	StrategyRoundRobin Strategy = "round_robin"
	// StrategyRandom picks a healthy agent uniformly from the request's Rand.
	StrategyRandom Strategy = "random"
	// StrategyWeighted picks a healthy agent with probability proportional
	// to its Weight.
	StrategyWeighted Strategy = "weighted"
	// StrategyLeastActive picks the agent with the lowest Running/Capacity,
	// then the shortest AvgDuration, then the lowest ID.
	StrategyLeastActive Strategy = "least_active"
	// StrategyConsistentHash maps the request's Key to the same agent for as
	// long as that agent stays healthy.
	StrategyConsistentHash Strategy = "consistent_hash"
	// StrategyLoadAware is StrategyConsistentHash moved down the key's
	// preference order while the preferred agent is overloaded.
	StrategyLoadAware Strategy = "load_aware"
	// StrategyFailover picks the first healthy agent sorted by ID, so all
	// work sticks to one agent until it fails.
	StrategyFailover Strategy = "failover"
	// StrategyBroadcast runs one task per healthy agent; see Pool.Broadcast.
	StrategyBroadcast Strategy = "broadcast"
)

// Strategies lists every strategy, for validation and documentation.
func Strategies() []Strategy {
	return []Strategy{
		StrategyRoundRobin, StrategyRandom, StrategyWeighted, StrategyLeastActive,
		StrategyConsistentHash, StrategyLoadAware, StrategyFailover, StrategyBroadcast,
	}
}

// ParseStrategy returns the Strategy named s, or an error for an unknown
// name. Validate at the edge (API, database): Pool.Pick treats an unknown
// strategy as "no eligible agent".
func ParseStrategy(s string) (Strategy, error) {
	for _, strategy := range Strategies() {
		if string(strategy) == s {
			return strategy, nil
		}
	}
	return "", fmt.Errorf("unknown routing strategy %q", s)
}

// NeedsKey reports whether the strategy routes by Request.Key.
func (s Strategy) NeedsKey() bool {
	return s == StrategyConsistentHash || s == StrategyLoadAware
}
