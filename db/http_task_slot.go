package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/google/uuid"
)

// HTTPTaskSlotTake takes a slot in tx when the attempt is due and its job
// and host have room; the slot is held until HTTPTaskSlotRelease (or Hold
// passes). Takes of one job and one host are serialized by advisory locks
// held until tx ends, so the caps are exact.
func HTTPTaskSlotTake(ctx context.Context, e Executor, s *axtype.HTTPTaskSlot) (*axtype.HTTPTaskSlotOutcome, error) {
	if err := queries.HTTPTaskSlotLock(ctx, e, dbsqlc.HTTPTaskSlotLockParams{JobID: s.JobID, Host: s.Host}); err != nil {
		return nil, fmt.Errorf("error locking http task slots of job %s: %w", s.JobID, mapErr(err))
	}
	r, err := queries.HTTPTaskSlotTake(ctx, e, dbsqlc.HTTPTaskSlotTakeParams{TaskID: s.TaskID, Attempt: int32(s.Attempt),
		JobID: s.JobID, Host: s.Host, MaxPerJob: int32(s.MaxPerJob), MaxPerHost: int32(s.MaxPerHost),
		HoldSeconds: s.Hold.Seconds(), RiverJobID: nonZero(s.RiverJobID)})
	if err != nil {
		return nil, fmt.Errorf("error taking an http task slot for task %s: %w", s.TaskID, mapErr(err))
	}
	return &axtype.HTTPTaskSlotOutcome{Due: r.Due, Room: r.Room, Taken: r.Taken,
		Waited: time.Duration(r.WaitedSeconds * float64(time.Second))}, nil
}

// HTTPTaskSlotRelease frees a task's slot and returns the River jobs of
// the waiting requests to wake for it (at most two: the longest-waiting
// one of its job, and of its host), marked woken; one woken less than
// rewake ago is passed over.
func HTTPTaskSlotRelease(ctx context.Context, e Executor, taskID uuid.UUID, rewake time.Duration) ([]int64, error) {
	wake, err := queries.HTTPTaskSlotRelease(ctx, e, dbsqlc.HTTPTaskSlotReleaseParams{TaskID: taskID,
		RewakeSeconds: rewake.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error releasing the http task slot of task %s: %w", taskID, mapErr(err))
	}
	return wake, nil
}

// HTTPTaskSlotWaitEnd forgets the wait of a River job that is gone.
func HTTPTaskSlotWaitEnd(ctx context.Context, e Executor, riverJobID int64) error {
	if err := queries.HTTPTaskSlotWaitEnd(ctx, e, riverJobID); err != nil {
		return fmt.Errorf("error ending the slot wait of river job %d: %w", riverJobID, mapErr(err))
	}
	return nil
}

// nonZero is nil for 0, else a pointer to n.
func nonZero(n int64) *int64 {
	if n == 0 {
		return nil
	}
	return &n
}

// HTTPTaskSlotDeleteExpired deletes slots whose worker died.
func HTTPTaskSlotDeleteExpired(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.HTTPTaskSlotDeleteExpired(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error deleting expired http task slots: %w", mapErr(err))
	}
	return n, nil
}
