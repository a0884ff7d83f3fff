package jobtemplate

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUTime is the CPU time the calling thread has used. Not
// getrusage(RUSAGE_THREAD): it reads the thread's runtime as of the last
// scheduler tick, milliseconds stale for a thread that is running.
func threadCPUTime() (time.Duration, bool) {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
