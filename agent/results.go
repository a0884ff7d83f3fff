package agent

import (
	"context"
	"time"
)

// Batching of results. The server records a batch in one statement, so a
// few milliseconds of waiting for company are paid back many times under
// load; at rest a lone result leaves after resultFlushDelay.
const (
	resultBatchMax   = 200
	resultBatchBytes = 4 << 20 // the server takes 8 MiB per request; JSON escaping may grow text
	resultFlushDelay = 5 * time.Millisecond
)

// reportResults sends results as they come until stopping is closed and
// none is left, or ctx ends.
func (a *Agent) reportResults(ctx context.Context, stopping <-chan struct{}) {
	for a.awaitResults(ctx, stopping) {
		for batch := a.nextResults(); len(batch) > 0; batch = a.nextResults() {
			a.sendResults(ctx, batch)
		}
	}
}

func (a *Agent) nextResults() []TaskResult {
	return a.running.takeResults(resultBatchMax, resultBatchBytes)
}

// awaitResults waits for a result, then a few ms more unless a full batch
// is already waiting. It returns false when there is nothing more to do.
func (a *Agent) awaitResults(ctx context.Context, stopping <-chan struct{}) bool {
	select {
	case <-a.running.resultReady:
	case <-stopping:
		if a.running.pendingResults() == 0 {
			return false
		}
	case <-ctx.Done():
		return false
	}
	if a.running.pendingResults() < resultBatchMax {
		return sleep(ctx, resultFlushDelay) == nil
	}
	return true
}

// sendResults reports a batch, retrying while the server is away. Before
// each try, results whose lease was lost or ran out are left out: the
// server would refuse them, and a stale result must never be recorded.
// Results the server answered for, accepted or conflict, are done with; a
// conflict is never retried.
func (a *Agent) sendResults(ctx context.Context, batch []TaskResult) {
	err := a.call(ctx, "complete", func(ctx context.Context, s Session) error {
		batch = a.reportable(ctx, batch)
		if len(batch) == 0 {
			return nil
		}
		outcomes, err := a.server.Complete(ctx, s, batch)
		if err == nil {
			a.logOutcomes(ctx, batch, outcomes)
		}
		return err
	})
	if err != nil && len(batch) > 0 {
		a.log.ErrorContext(ctx, "dropping results the server refused", "results", len(batch), "error", err)
	}
	a.running.resolve(batch)
}

func (a *Agent) reportable(ctx context.Context, batch []TaskResult) []TaskResult {
	keep, expired, lost := a.running.reportable(batch)
	for _, t := range expired {
		a.taskLogger(t).WarnContext(ctx, "lease expired before the result could be reported: result dropped")
	}
	for _, t := range lost {
		a.taskLogger(t).WarnContext(ctx, "lease lost before the result could be reported: result dropped")
	}
	return keep
}

func (a *Agent) logOutcomes(ctx context.Context, batch []TaskResult, outcomes []ResultOutcome) {
	conflict := map[string]bool{}
	for _, o := range outcomes {
		if o.Status == OutcomeConflict {
			conflict[o.TaskID] = true
		}
	}
	if len(conflict) == 0 {
		return
	}
	for _, r := range batch {
		if t, ok := a.running.task(r.TaskID); ok && conflict[r.TaskID] {
			a.taskLogger(t).WarnContext(ctx, "server refused the result: the lease is no longer ours; dropped",
				"state", r.State)
		}
	}
}

// sendLogs sends one batch of log chunks, retrying while the server is
// away (within the caller's deadline).
func (a *Agent) sendLogs(ctx context.Context, chunks []LogChunk) error {
	return a.call(ctx, "logs", func(ctx context.Context, s Session) error {
		return a.server.Logs(ctx, s, chunks)
	})
}
