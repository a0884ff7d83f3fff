package queue

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
)

// Errors of JobService.PreviewShards.
var (
	// ErrNoNextFire is a preview without a time of a job that will not
	// fire on its own (manual, paused, or a delay that fired).
	ErrNoNextFire = errors.New("the job has no next fire")
	// ErrBroadcastShards is a preview of a broadcast job, whose shards are
	// the agents live when it fires.
	ErrBroadcastShards = errors.New("a broadcast job has one task per live agent")
)

// ShardPreview is what the shards of one fire of a job get.
type ShardPreview struct {
	JobID        uuid.UUID
	ScheduledFor time.Time
	Params       []string // one per shard, in shard order
}

// PreviewShards returns the shard params that a fire of job id scheduled
// for at (nil: its next fire) gets, by the code the fire itself runs
// (dispatch.JobShardParams mirrors TaskPlanForExecutions).
func (s *JobService) PreviewShards(ctx context.Context, id uuid.UUID, at *time.Time) (*ShardPreview, error) {
	job, err := db.JobGetByID(ctx, s.pool, id)
	if err != nil {
		return nil, err
	}
	if job.RouteStrategy == axtype.RouteBroadcast {
		return nil, ErrBroadcastShards
	}
	if at == nil {
		if job.NextFireAt == nil || job.Paused {
			return nil, ErrNoNextFire
		}
		at = job.NextFireAt
	}
	params, err := dispatch.JobShardParams(job, *at)
	if err != nil {
		return nil, err
	}
	return &ShardPreview{JobID: id, ScheduledFor: at.UTC(), Params: params}, nil
}
