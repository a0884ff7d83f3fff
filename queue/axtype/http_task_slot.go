package axtype

import (
	"time"

	"github.com/google/uuid"
)

// HTTPTaskSlot asks for a slot for one request of an agentless task: at
// most MaxPerJob of a job's and MaxPerHost of a host's requests are in
// flight at once, across replicas.
type HTTPTaskSlot struct {
	TaskID     uuid.UUID
	Attempt    int
	JobID      uuid.UUID
	Host       string
	MaxPerJob  int
	MaxPerHost int
	// Hold bounds the slot if its worker dies: after it, the slot counts
	// for nothing.
	Hold time.Duration
	// RiverJobID, when not 0, is the River job sending the request: with
	// no room, it is recorded as waiting, for HTTPTaskSlotRelease to wake.
	RiverJobID int64
}

// HTTPTaskSlotOutcome says what a slot take found: whether the attempt was
// due (pending, not before now), whether its job and host had room, and
// whether the slot was taken.
type HTTPTaskSlotOutcome struct {
	Due, Room, Taken bool
	// Waited is how long the request has waited for room (0 unless it is
	// recorded as waiting: due, no room, RiverJobID set).
	Waited time.Duration
}
