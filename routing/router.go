package routing

import (
	"cmp"
	"errors"
	"fmt"
	"math"
)

// Config tunes routing. The zero value is the default.
type Config struct {
	// LoadThreshold is the load above which load_aware moves a key to its
	// next preferred agent. An agent's load is the larger of
	// Running/Capacity and its smoothed Load (the busiest of slots, CPU and
	// memory over a few minutes), so 0.8 means "80% of its slots, its CPU
	// or its memory are busy"; an agent exactly at the threshold keeps its
	// keys. Defaults to 0.8.
	LoadThreshold float64

	// Slots is how many equal slots the consistent-hash ring is cut into.
	// Each agent's share of keys deviates from fair by about
	// sqrt(agents/Slots): 1.2% for 10 agents, 3.9% for 100, 12% for 1,000.
	// More slots balance large pools better but cost Slots × agents work per
	// ring build and 4 bytes per slot. Changing it remaps keys, so keep it
	// fixed in a deployment. Defaults to 65,536.
	Slots int
}

const (
	defaultLoadThreshold = 0.8
	defaultSlots         = 1 << 16
	maxSlots             = 1 << 24
)

func (c Config) withDefaults() Config {
	c.LoadThreshold = cmp.Or(c.LoadThreshold, defaultLoadThreshold)
	c.Slots = cmp.Or(c.Slots, defaultSlots)
	return c
}

func (c Config) validate() error {
	var errs []error
	if math.IsNaN(c.LoadThreshold) || c.LoadThreshold < 0 {
		errs = append(errs, fmt.Errorf("LoadThreshold must be positive, got %v", c.LoadThreshold))
	}
	if c.Slots < 0 || c.Slots > maxSlots {
		errs = append(errs, fmt.Errorf("Slots must be between 1 and %d, got %d", maxSlots, c.Slots))
	}
	return errors.Join(errs...)
}

// Router builds Rings and Pools with one Config. It holds no state besides
// the Config and is safe for concurrent use.
type Router struct {
	config Config
}

// NewRouter returns a Router for config (nil means the defaults).
func NewRouter(config *Config) (*Router, error) {
	c := Config{}
	if config != nil {
		c = *config
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("error configuring routing: %w", err)
	}
	return &Router{config: c.withDefaults()}, nil
}

// Config returns the Router's settings with defaults filled in.
func (r *Router) Config() Config { return r.config }

// NewRing builds the consistent-hash Ring of the agents ids (duplicates and
// order do not matter). Build it once per membership and reuse it.
func (r *Router) NewRing(ids []string) *Ring {
	return newRing(ids, r.config.Slots)
}
