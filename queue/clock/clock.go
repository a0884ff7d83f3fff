// Package clock is the time the engine's clock-dependent queries run at:
// lease picks and expiries, the reaper's sweeps, the long poll's next
// ready task, the trigger loop's claims. Production leaves it nil and
// every such query reads the database's now(); a test sets one and moves
// it forward instead of sleeping until leases, steal delays or ticks fall
// due.
package clock

import (
	"sync"
	"time"
)

// Clock is a settable clock the engine's services share. The nil *Clock
// is the database's clock: Now returns nil and the queries fall back to
// now().
//
// A Clock keeps running from where it was set (real time plus an offset),
// rather than standing still, because statements that do not take it
// (triggers, job changes, the agentless HTTP worker) still write the
// database's now(): a running clock that only ever moves forward keeps
// those rows in order with it. Set it forward only; Advance is the usual
// way to move it.
type Clock struct {
	mu     sync.Mutex
	offset time.Duration
}

// New returns a Clock at real time.
func New() *Clock { return &Clock{} }

// Now returns the time the engine's queries should take as now, or nil
// for the database's own clock (a nil Clock).
func (c *Clock) Now() *time.Time {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now().Add(c.offset).UTC()
	return &now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// Set makes the clock read t now, and run on from there.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = time.Until(t)
}
