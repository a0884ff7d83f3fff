package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
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
}

// HTTPTaskSlotOutcome says what a slot take found: whether the attempt was
// due (pending, not before now), whether its job and host had room, and
// whether the slot was taken.
type HTTPTaskSlotOutcome struct {
	Due, Room, Taken bool
}

// HTTPTaskSlotTake takes a slot in tx when the attempt is due and its job
// and host have room; the slot is held until HTTPTaskSlotRelease (or Hold
// passes). Takes of one job and one host are serialized by advisory locks
// held until tx ends, so the caps are exact.
func HTTPTaskSlotTake(ctx context.Context, e Executor, s *HTTPTaskSlot) (*HTTPTaskSlotOutcome, error) {
	if err := queries.HTTPTaskSlotLock(ctx, e, dbsqlc.HTTPTaskSlotLockParams{JobID: s.JobID, Host: s.Host}); err != nil {
		return nil, fmt.Errorf("error locking http task slots of job %s: %w", s.JobID, mapErr(err))
	}
	r, err := queries.HTTPTaskSlotTake(ctx, e, dbsqlc.HTTPTaskSlotTakeParams{TaskID: s.TaskID, Attempt: int32(s.Attempt),
		JobID: s.JobID, Host: s.Host, MaxPerJob: int32(s.MaxPerJob), MaxPerHost: int32(s.MaxPerHost),
		HoldSeconds: s.Hold.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error taking an http task slot for task %s: %w", s.TaskID, mapErr(err))
	}
	return &HTTPTaskSlotOutcome{Due: r.Due, Room: r.Room, Taken: r.Taken}, nil
}

// HTTPTaskSlotRelease frees a task's slot.
func HTTPTaskSlotRelease(ctx context.Context, e Executor, taskID uuid.UUID) error {
	if err := queries.HTTPTaskSlotRelease(ctx, e, taskID); err != nil {
		return fmt.Errorf("error releasing the http task slot of task %s: %w", taskID, mapErr(err))
	}
	return nil
}

// HTTPTaskSlotDeleteExpired deletes slots whose worker died.
func HTTPTaskSlotDeleteExpired(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.HTTPTaskSlotDeleteExpired(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error deleting expired http task slots: %w", mapErr(err))
	}
	return n, nil
}
