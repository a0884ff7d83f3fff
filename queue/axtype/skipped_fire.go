package axtype

import (
	"time"

	"github.com/google/uuid"
)

// SkippedFire is a run of ticks of one job that did not fire.
type SkippedFire struct {
	JobID      uuid.UUID
	Reason     SkipReason
	FirstTick  time.Time
	LastTick   time.Time
	TickCount  int // 0: not counted (too many)
	Detail     string
	RecordedAt time.Time
}
