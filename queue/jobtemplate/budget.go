package jobtemplate

import (
	"runtime"
	"time"
)

// cpuBudget bounds a rendering by the CPU time it spends, not by the time
// it waits. On a saturated machine a goroutine can wait for a CPU longer
// than a whole budget: a trivial route key then failed its 50 ms, and its
// task went unrouted. Wall time, cheap to read, is checked first. Once it
// passes the limit, the rendering may spend the limit again in CPU time of
// its own, counted from then: reading the thread's CPU clock is a system
// call (6.5 µs on a loaded 2-core VM, several times a route key's
// rendering), so it is not read while the rendering is within its limit.
// A rendering thus stops after at least its limit, and at most twice it,
// of CPU time. The goroutine is locked to its thread while it renders, so
// that thread's CPU time is the rendering's.
type cpuBudget struct {
	limit     time.Duration
	wallStart time.Time
	// overtime: wall time has passed the limit; cpuAt is the thread's CPU
	// time then.
	overtime bool
	cpuAt    time.Duration
}

// startBudget locks the goroutine to its thread until stop.
func startBudget(limit time.Duration) cpuBudget {
	runtime.LockOSThread()
	return cpuBudget{limit: limit, wallStart: time.Now()}
}

func (b *cpuBudget) stop() { runtime.UnlockOSThread() }

// spent reports whether the rendering has used up its budget. Where the
// platform gives no thread CPU time, the budget is wall time, as before.
func (b *cpuBudget) spent() bool {
	if !b.overtime {
		if time.Since(b.wallStart) <= b.limit {
			return false
		}
		cpu, ok := threadCPUTime()
		if !ok {
			return true
		}
		b.overtime, b.cpuAt = true, cpu
		return false
	}
	cpu, ok := threadCPUTime()
	return !ok || cpu-b.cpuAt > b.limit
}
