package openapi

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
)

// ShardPreviewRequest asks what the shards of one fire of a job get.
type ShardPreviewRequest struct {
	At *time.Time `json:"at,omitempty" doc:"Scheduled time of the fire; default the job's next fire"`
}

// ShardPreview lists what the shards of one fire get, as its tasks will
// read them.
type ShardPreview struct {
	JobID        string         `json:"job_id" format:"uuid"`
	ScheduledFor time.Time      `json:"scheduled_for" doc:"The fire's scheduled time (UTC)"`
	Shards       []PreviewShard `json:"shards" doc:"One per shard, in shard order"`
}

// PreviewShard is one shard of a previewed fire.
type PreviewShard struct {
	Index int    `json:"index"`
	Total int    `json:"total"`
	Param string `json:"param" doc:"The task's shard_param: the job's entry, its part of the range, or the generator's JSON object"`
}

type shardPreviewInput struct {
	ID   string               `path:"id" format:"uuid" doc:"Job id"`
	Body *ShardPreviewRequest `required:"false"`
}

type shardPreviewOutput struct {
	Body ShardPreview
}

func (h *jobHandlers) registerShardPreview(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "preview-job-shards", Method: http.MethodPost, Path: "/v1/jobs/{id}/shards/preview", Tags: []string{"Jobs"},
		Summary: "Show the shard params of a fire of a job",
		Description: "Renders what each task of a fire scheduled at `at` (default: the job's next fire) gets as its shard_param, " +
			"by the code a real fire runs: a generator's windows or residues, the job's params, or its parts of the range.",
		Errors: []int{http.StatusNotFound, http.StatusUnprocessableEntity},
	}, ScopeRead), h.previewShards)
}

func (h *jobHandlers) previewShards(ctx context.Context, in *shardPreviewInput) (*shardPreviewOutput, error) {
	id, err := h.visible(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	var at *time.Time
	if in.Body != nil {
		at = in.Body.At
	}
	p, err := h.jobs.PreviewShards(ctx, id, at)
	switch {
	case errors.Is(err, queue.ErrNoNextFire):
		return nil, huma.Error422UnprocessableEntity("the job has no next fire",
			&huma.ErrorDetail{Location: "body.at", Message: "is required: the job does not fire on its own (manual, paused or done)"})
	case errors.Is(err, queue.ErrBroadcastShards):
		return nil, huma.Error422UnprocessableEntity("a broadcast job's shards are the agents live when it fires",
			&huma.ErrorDetail{Location: "path.id", Message: "names a broadcast job", Value: in.ID})
	case err != nil:
		return nil, jobError(err, nil)
	}
	out := ShardPreview{JobID: p.JobID.String(), ScheduledFor: p.ScheduledFor, Shards: make([]PreviewShard, len(p.Params))}
	for i, param := range p.Params {
		out.Shards[i] = PreviewShard{Index: i, Total: len(p.Params), Param: param}
	}
	return &shardPreviewOutput{Body: out}, nil
}
