//go:build !linux

package jobtemplate

import "time"

// threadCPUTime is not measured here: budgets are wall time.
func threadCPUTime() (time.Duration, bool) { return 0, false }
