package openapi

import (
	"context"
	"net/http"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// JobGraph is a job's place among jobs that run after others.
type JobGraph struct {
	JobID      string         `json:"job_id" format:"uuid"`
	Job        string         `json:"job" doc:"The job, as group/name"`
	Mode       string         `json:"mode,omitempty" enum:"all,any" doc:"For a job of trigger kind after: whether it waits for all its upstreams or any"`
	Upstream   []JobGraphEdge `json:"upstream" doc:"The jobs it runs after (trigger kind after), in the order given"`
	Downstream []JobGraphEdge `json:"downstream" doc:"The jobs that run after it, by group and name"`
}

// JobGraphEdge is a job at the other end of an edge of the job graph.
type JobGraphEdge struct {
	JobID string `json:"job_id" format:"uuid"`
	Job   string `json:"job" example:"etl/load-orders" doc:"The job, as group/name"`
	On    string `json:"on" enum:"success,failure,completion" doc:"The end the upstream's run must reach"`
	Mode  string `json:"mode,omitempty" enum:"all,any" doc:"For a downstream: its mode"`
}

type jobGraphOutput struct {
	Body JobGraph
}

func (h *jobHandlers) registerGraph(api huma.API) {
	register(api, requireScope(huma.Operation{
		OperationID: "get-job-graph", Method: http.MethodGet, Path: "/v1/jobs/{id}/graph", Tags: []string{"Jobs"},
		Summary: "The jobs a job runs after, and those that run after it",
		Description: "A job of trigger kind after lists its upstream jobs (each with the end its runs must reach) and its " +
			"mode; every job lists the jobs that run after it. Follow the ids to walk the whole graph.",
		Errors: []int{http.StatusNotFound},
	}, ScopeRead), h.graph)
}

func (h *jobHandlers) graph(ctx context.Context, in *jobIDInput) (*jobGraphOutput, error) {
	id, err := h.visible(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	g, err := h.jobs.Graph(ctx, id)
	if err != nil {
		return nil, jobError(err, nil)
	}
	return &jobGraphOutput{Body: jobGraphFromQueue(g)}, nil
}

func jobGraphFromQueue(g *queue.JobGraph) JobGraph {
	out := JobGraph{JobID: g.Job.ID.String(), Job: g.Job.Group + "/" + g.Job.Name, Mode: string(g.Mode),
		Upstream: []JobGraphEdge{}, Downstream: []JobGraphEdge{}}
	for _, u := range g.Upstreams {
		out.Upstream = append(out.Upstream, JobGraphEdge{JobID: u.JobID.String(), Job: u.Job, On: string(u.On)})
	}
	for _, d := range g.Downstreams {
		out.Downstream = append(out.Downstream, graphEdge(d))
	}
	return out
}

func graphEdge(d axtype.AfterLink) JobGraphEdge {
	return JobGraphEdge{JobID: d.JobID.String(), Job: d.Job, On: string(d.On), Mode: string(d.Mode)}
}
