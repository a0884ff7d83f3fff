package openapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// maxWait caps a long poll of GET /v1/executions/{id}?wait=.
const maxWait = 60 * time.Second

type executionGetInput struct {
	ID   string `path:"id" format:"uuid" doc:"Execution id"`
	Wait string `query:"wait" maxLength:"10" pattern:"^[0-9]+(ms|s|m)$" example:"30s" doc:"Long poll: answer as soon as the execution has ended, or after this long (at most 60s) with its state then"`
	// ShardsFrom pages the tasks' results (axtype.MaxListedResults).
	ShardsFrom int `query:"shards_from" minimum:"0" maximum:"100000" doc:"Give the tasks' results and errors from this shard index on (every task is listed; a task whose result or error is left out has result_omitted). A listing gives at most 1,000 tasks' results and errors, as many as 8 MiB hold by their stored size (the first whatever its size; see the submitting-work guide)"`
}

// getExecution answers GET /v1/executions/{id}: the execution with its
// tasks and its callback, once it has ended when the caller waits.
func (h *executionHandlers) getExecution(ctx context.Context, in *executionGetInput) (*executionOutput, error) {
	id, err := parseID(in.ID)
	if err != nil {
		return nil, err
	}
	wait, err := parseWait(in.Wait)
	if err != nil {
		return nil, err
	}
	if err := h.guard.execution(ctx, id); err != nil {
		return nil, err
	}
	// A delayed run that has yet to fire answers at once: waiting for its
	// end could outlast any wait.
	if run, err := h.execs.ScheduledRun(ctx, id); err == nil {
		return &executionOutput{Body: executionFromScheduled(run)}, nil
	} else if !errors.Is(err, axtype.ErrNotFound) {
		return nil, err
	}
	var ended *axtype.Execution
	if wait > 0 {
		// Waiting holds no connection: the turn goes to other calls
		// meanwhile (a minute's long polls held them all).
		back := awayFromTurn(ctx)
		exec, err := h.waiter.Wait(ctx, id, wait)
		if berr := back(); berr != nil {
			return nil, huma.Error503ServiceUnavailable("the request ended while it waited for its turn")
		}
		if err != nil {
			return nil, executionError(err)
		}
		if exec.State.Ended() { // it changes no more: not read again
			ended = exec
		}
	}
	return h.showExecution(ctx, id, ended, in.ShardsFrom)
}

// showExecution reads the run (unless given, ended), its tasks, its
// callback and its lineage. The callback and the lineage are read beside
// the run, not after it: a ?wait= answer waited for each read in turn, a
// round trip each, which under load came to hundreds of milliseconds.
func (h *executionHandlers) showExecution(ctx context.Context, id uuid.UUID, ended *axtype.Execution, shardsFrom int) (*executionOutput, error) {
	var (
		cb             *axtype.Callback
		lineage        *axtype.RunLineage
		cbErr, lineErr error
		beside         sync.WaitGroup
	)
	beside.Go(func() { cb, cbErr = h.callbacks.Get(ctx, id) })
	beside.Go(func() { lineage, lineErr = h.execs.Lineage(ctx, id) })
	defer beside.Wait() // on an early return too: they write these variables
	exec, tasks, err := ended, []*axtype.Task(nil), error(nil)
	if exec != nil {
		tasks, err = h.execs.Tasks(ctx, id, shardsFrom)
	} else {
		exec, tasks, err = h.execs.Get(ctx, id, shardsFrom)
	}
	if err != nil {
		return nil, executionError(err)
	}
	out, err := executionFromDB(exec, tasks)
	if err != nil {
		return nil, err
	}
	causedBy, err := h.execs.CausedBy(ctx, exec)
	if err != nil {
		return nil, err
	}
	beside.Wait()
	if cbErr != nil {
		return nil, cbErr
	}
	if lineErr != nil {
		return nil, lineErr
	}
	out.Callback = callbackFromDB(cb)
	showLineage(out, lineage, causedBy)
	return &executionOutput{Body: out}, nil
}

func parseWait(s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d > maxWait {
		return 0, huma.Error422UnprocessableEntity("invalid wait",
			&huma.ErrorDetail{Location: "query.wait", Message: "must be a duration of at most 60s, like 30s", Value: s})
	}
	return d, nil
}
