package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
)

// handlerExecutor runs the Go handler a task names.
type handlerExecutor struct {
	handlers handlerLookup
}

func (e *handlerExecutor) execute(ctx context.Context, t LeasedTask, out *taskOutput, log *slog.Logger) (json.RawMessage, error) {
	fn, ok := e.handlers.get(t.Executor.Handler)
	if !ok {
		return nil, fmt.Errorf("no handler %q is registered on this agent (registered: %s)",
			t.Executor.Handler, cmp.Or(strings.Join(e.handlers.names(), ", "), "none"))
	}
	output := out.stream(streamStdout)
	defer output.Close()
	res, err := callHandler(ctx, fn, sdkTask(t, log, output))
	if err != nil {
		return nil, err
	}
	return encodeResult(res)
}

// callHandler turns a handler's panic into the task's failure: one bad
// task must not take down the agent and every other task on it.
func callHandler(ctx context.Context, fn HandlerFunc, t Task) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = WithErrorCode("handler_panic", fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack()))
		}
	}()
	return fn(ctx, t)
}

func encodeResult(res Result) (json.RawMessage, error) {
	if res == nil {
		return nil, nil
	}
	if raw, ok := res.(json.RawMessage); ok {
		if !json.Valid(raw) {
			return nil, fmt.Errorf("handler returned a json.RawMessage that is not valid JSON")
		}
		return raw, nil
	}
	b, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("error encoding the handler's result: %w", err)
	}
	return b, nil
}

func sdkTask(t LeasedTask, log *slog.Logger, output *streamWriter) Task {
	return Task{ExecutionID: t.ExecutionID, TaskID: t.TaskID, JobID: t.JobID, ShardIndex: t.ShardIndex,
		ShardTotal: t.ShardTotal, ShardParam: t.ShardParam, Attempt: t.Attempt, MaxAttempts: t.MaxAttempts,
		Params: t.Params, ScheduledFor: t.ScheduledFor, Deadline: t.Deadline, TraceParent: t.TraceParent, Logger: log, Output: output}
}
