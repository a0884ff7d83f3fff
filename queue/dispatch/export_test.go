package dispatch

import (
	"context"
	dto "github.com/prometheus/client_model/go"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// BatchPace is batchPace, for the tests of package dispatch_test.
const BatchPace = batchPace

// ServeResults records the calls (agents[i] reporting results[i]) as one
// coalesced batch under ctx, and returns each call's answer.
func (s *LeaseBroker) ServeResults(ctx context.Context, agents []uuid.UUID, results [][]axtype.TaskResult) ([][]axtype.CompletedTask, []error) {
	asks := make([]*batchAsk[agentResults, []axtype.CompletedTask], len(agents))
	for i := range agents {
		asks[i] = &batchAsk[agentResults, []axtype.CompletedTask]{q: agentResults{agentID: agents[i], results: results[i]},
			done: make(chan batchAnswer[[]axtype.CompletedTask], 1)}
	}
	s.serveResults(ctx, asks)
	done, errs := make([][]axtype.CompletedTask, len(asks)), make([]error, len(asks))
	for i, a := range asks {
		answer := <-a.done
		done[i], errs[i] = answer.v, answer.err
	}
	return done, errs
}

// LeaseChecksForTest is how many checks waiting polls have begun
// (metrics.LeaseChecks).
func (s *LeaseBroker) LeaseChecksForTest() float64 {
	var m dto.Metric
	_ = s.metrics.LeaseChecks.Write(&m)
	return m.GetCounter().GetValue()
}
