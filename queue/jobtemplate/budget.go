package jobtemplate

import (
	"runtime"
	"time"
)

// cpuBudget bounds a rendering by the CPU time it spends, not by the time
// it waits. On a saturated machine a goroutine can wait for a CPU longer
// than a whole budget: a trivial route key then failed its 50 ms, and its
// task went unrouted. Wall time, cheap to read, is checked first; only
// once it passes the limit is the thread's own CPU time read (a system
// call). The goroutine is locked to its thread while it renders, so that
// thread's CPU time is the rendering's.
type cpuBudget struct {
	limit     time.Duration
	wallStart time.Time
	cpuStart  time.Duration
	// perThread is false where the platform gives no thread CPU time:
	// the budget is then wall time, as before.
	perThread bool
}

// startBudget locks the goroutine to its thread until stop.
func startBudget(limit time.Duration) *cpuBudget {
	runtime.LockOSThread()
	cpu, ok := threadCPUTime()
	return &cpuBudget{limit: limit, wallStart: time.Now(), cpuStart: cpu, perThread: ok}
}

func (b *cpuBudget) stop() { runtime.UnlockOSThread() }

// spent reports whether the rendering has used up its budget.
func (b *cpuBudget) spent() bool {
	if time.Since(b.wallStart) <= b.limit {
		return false // it cannot have spent more CPU than time passed
	}
	if !b.perThread {
		return true
	}
	cpu, ok := threadCPUTime()
	return !ok || cpu-b.cpuStart > b.limit
}
