package agent

import (
	"context"
	"errors"
	"strings"
	"time"
)

// Batching of results. The server records a batch in one statement, so a
// few milliseconds of waiting for company are paid back many times under
// load; at rest a lone result leaves after resultFlushDelay.
const (
	resultBatchMax   = 1000
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

// resultServerErrors is how many 500 answers in a row one batch of
// results gets before it counts as refused: a server that fails a batch
// again and again may be failing on one of its results. With the
// backoff's 200 ms doubling, eight take about 50 s, longer than a
// Postgres restart, whose 500s must not cost a good result anything.
const resultServerErrors = 8

// errResultsRefused marks a batch the server refused (a 4xx other than
// 401/409, or resultServerErrors 5xx in a row): trying it again as it is
// would be refused again, so it is split instead.
var errResultsRefused = errors.New("the server refused the results")

// sendResults reports a batch. Before each try, results whose lease was
// lost or ran out are left out: the server would refuse them, and a stale
// result must never be recorded. Results the server answered for,
// accepted or conflict, are done with; a conflict is never retried. A
// batch the server refuses is split in halves and each sent again, so
// one result it cannot take costs only itself; that one is reported as a
// failure with code bad_result and the server's reason instead. What
// cannot be delivered at all (refused again, or the agent is stopping) is
// logged with its execution_id and forgotten: its lease is no longer
// renewed, so it runs out and the lease rules recover the task.
func (a *Agent) sendResults(ctx context.Context, batch []TaskResult) {
	for _, r := range a.deliver(ctx, batch, false) {
		if t, ok := a.running.task(r.TaskID); ok {
			a.taskLogger(t).ErrorContext(ctx, "result not delivered: its lease is no longer renewed and will expire, then the lease rules recover the task",
				"state", r.State, "error_code", r.ErrorCode)
		}
	}
	a.running.resolve(batch)
}

// deliver sends batch and returns the results it could not deliver.
// fallback says the batch is a bad_result report already.
func (a *Agent) deliver(ctx context.Context, batch []TaskResult, fallback bool) []TaskResult {
	var refused error
	serverErrors := 0
	err := a.call(ctx, "complete", func(ctx context.Context, s Session) error {
		batch = a.reportable(ctx, batch)
		if len(batch) == 0 {
			return nil
		}
		outcomes, err := a.server.Complete(ctx, s, batch)
		if err == nil {
			a.logOutcomes(ctx, batch, outcomes)
			return nil
		}
		if refusal(err, &serverErrors) {
			refused = err
			return errors.Join(errResultsRefused, err)
		}
		return err
	})
	switch {
	case err == nil:
		return nil
	case refused == nil || ctx.Err() != nil:
		return batch
	case len(batch) > 1:
		a.log.WarnContext(ctx, "server refused a batch of results: sending it in halves", "results", len(batch), "error", refused)
		half := len(batch) / 2
		return append(a.deliver(ctx, batch[:half], fallback), a.deliver(ctx, batch[half:], fallback)...)
	case fallback || !isClientError(refused):
		// A lone result the server keeps failing with 500 is given up, not
		// reported failed: the fault may be the server's, and the lease
		// rules run the task again.
		return batch
	}
	if t, ok := a.running.task(batch[0].TaskID); ok {
		a.taskLogger(t).WarnContext(ctx, "server refused the result: reporting the task failed with bad_result", "error", refused)
	}
	return a.deliver(ctx, []TaskResult{badResultReport(batch[0], refused)}, true)
}

// refusal says whether err refuses a batch for good: a 4xx (401 and 409
// are handled before), or the resultServerErrors-th 500 in a row. 502,
// 503 and 504 say the server or its database is away for now (503 is
// also the body budget's answer): they are retried as they are.
func refusal(err error, serverErrors *int) bool {
	var se *StatusError
	if !errors.As(err, &se) {
		return false
	}
	if se.Code == 500 {
		*serverErrors++
		return *serverErrors >= resultServerErrors
	}
	if se.Code > 500 {
		return false
	}
	return !se.Temporary()
}

// isClientError says err is a 4xx: the server refused what was sent.
func isClientError(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code >= 400 && se.Code < 500
}

// maxReasonBytes bounds the server's reason kept in a bad_result report.
const maxReasonBytes = 4 << 10

// badResultReport is r reported as a failure the server can store: code
// bad_result, and why the server refused r.
func badResultReport(r TaskResult, refused error) TaskResult {
	reason := "the server refused the result: " + refused.Error()
	if len(reason) > maxReasonBytes {
		reason = reason[:maxReasonBytes]
	}
	return TaskResult{TaskID: r.TaskID, LeaseToken: r.LeaseToken, State: StateFailed,
		ErrorCode: ErrorCodeBadResult, Error: storableText(reason)}
}

// storableText returns s as the server can store it: invalid UTF-8
// becomes U+FFFD and NUL becomes U+2400 (␀) (the server refuses a body
// with \u0000 in it whole).
func storableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\u2400")
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
