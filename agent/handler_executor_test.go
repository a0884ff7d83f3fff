package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func runHandler(t *testing.T, regs handlerLookup, task LeasedTask) (json.RawMessage, error, *chunkSink) {
	t.Helper()
	sink := &chunkSink{}
	e := &handlerExecutor{handlers: regs}
	res, err := e.execute(context.Background(), task, newTaskOutput(task.Ref(), 1<<20, sink.ship), slog.New(slog.DiscardHandler))
	return res, err, sink
}

func TestHandlerExecutorGivesHandlerTheTask(t *testing.T) {
	t.Parallel()
	regs := &handlerRegistry{}
	var seen Task
	regs.add("reports.nightly", func(_ context.Context, task Task) (Result, error) {
		seen = task
		var p struct{ Day string }
		if err := task.DecodeParams(&p); err != nil {
			return nil, err
		}
		_, _ = task.Output.Write([]byte("building\n"))
		return map[string]any{"day": p.Day, "key": task.IdempotencyKey()}, nil
	})
	task := handlerTask("t1", "reports.nightly")
	task.ShardIndex, task.ShardTotal, task.ShardParam, task.Attempt, task.MaxAttempts = 1, 3, "b", 2, 5
	task.ScheduledFor = time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	task.Params = json.RawMessage(`{"day":"2024-04-30"}`)
	task.LeaseToken = "tok"

	res, err, sink := runHandler(t, handlerLookup{regs}, task)
	require.NoError(t, err)
	require.JSONEq(t, `{"day":"2024-04-30","key":"exec-t1:1"}`, string(res))
	require.Equal(t, "building\n", sink.text(streamStdout))
	require.Equal(t, "exec-t1", seen.ExecutionID)
	require.Equal(t, "t1", seen.TaskID)
	require.Equal(t, "job-1", seen.JobID)
	require.Equal(t, []int{1, 3, 2, 5}, []int{seen.ShardIndex, seen.ShardTotal, seen.Attempt, seen.MaxAttempts})
	require.Equal(t, "b", seen.ShardParam)
	require.Equal(t, task.ScheduledFor, seen.ScheduledFor)
	require.NotNil(t, seen.Logger)
}

func TestHandlerExecutorUnknownHandler(t *testing.T) {
	t.Parallel()
	regs := &handlerRegistry{}
	regs.add("a.one", func(context.Context, Task) (Result, error) { return nil, nil })
	_, err, _ := runHandler(t, handlerLookup{regs}, handlerTask("t", "a.missing"))
	require.EqualError(t, err, `no handler "a.missing" is registered on this agent (registered: a.one)`)
}

func TestHandlerExecutorPanicFailsTask(t *testing.T) {
	t.Parallel()
	regs := &handlerRegistry{}
	regs.add("boom", func(context.Context, Task) (Result, error) { panic("nil map") })
	_, err, _ := runHandler(t, handlerLookup{regs}, handlerTask("t", "boom"))
	require.ErrorContains(t, err, "handler panicked: nil map")
}

func TestHandlerExecutorResults(t *testing.T) {
	t.Parallel()
	regs := &handlerRegistry{}
	regs.add("nil", func(context.Context, Task) (Result, error) { return nil, nil })
	regs.add("raw", func(context.Context, Task) (Result, error) { return json.RawMessage(`[1,2]`), nil })
	regs.add("bad", func(context.Context, Task) (Result, error) { return func() {}, nil })
	regs.add("err", func(context.Context, Task) (Result, error) { return nil, errors.New("no data for that day") })

	res, err, _ := runHandler(t, handlerLookup{regs}, handlerTask("t", "nil"))
	require.NoError(t, err)
	require.Nil(t, res)
	res, err, _ = runHandler(t, handlerLookup{regs}, handlerTask("t", "raw"))
	require.NoError(t, err)
	require.JSONEq(t, `[1,2]`, string(res))
	_, err, _ = runHandler(t, handlerLookup{regs}, handlerTask("t", "bad"))
	require.ErrorContains(t, err, "error encoding the handler's result")
	_, err, _ = runHandler(t, handlerLookup{regs}, handlerTask("t", "err"))
	require.EqualError(t, err, "no data for that day")
}

func TestHandlerLookupPrefersAgentHandlers(t *testing.T) {
	t.Parallel()
	own, shared := &handlerRegistry{}, &handlerRegistry{}
	own.add("x", func(context.Context, Task) (Result, error) { return "own", nil })
	shared.add("x", func(context.Context, Task) (Result, error) { return "shared", nil })
	shared.add("y", func(context.Context, Task) (Result, error) { return "shared", nil })
	regs := handlerLookup{own, shared}

	res, _, _ := runHandler(t, regs, handlerTask("t", "x"))
	require.JSONEq(t, `"own"`, string(res))
	res, _, _ = runHandler(t, regs, handlerTask("t", "y"))
	require.JSONEq(t, `"shared"`, string(res))
	require.Equal(t, []string{"x", "y"}, regs.names())
}

func TestHandleRejectsMistakes(t *testing.T) {
	t.Parallel()
	regs := &handlerRegistry{}
	fn := func(context.Context, Task) (Result, error) { return nil, nil }
	require.Panics(t, func() { regs.add("", fn) })
	require.Panics(t, func() { regs.add("x", nil) })
	regs.add("x", fn)
	require.Panics(t, func() { regs.add("x", fn) })
}

// registerPackageHandler registers once per process: -count reruns tests.
var registerPackageHandler sync.Once

func TestPackageHandleReachesEveryAgent(t *testing.T) {
	t.Parallel()
	registerPackageHandler.Do(func() {
		Handle("test.package-level", func(context.Context, Task) (Result, error) { return "from default", nil })
	})
	d := newServerDouble()
	a := newTestAgent(t, d, Config{})
	d.add(handlerTask("p", "test.package-level"))
	start(t, a)
	eventually(t, func() bool { _, ok := d.resultOf("p"); return ok }, "reported")
	r, _ := d.resultOf("p")
	require.JSONEq(t, `"from default"`, string(r.Result))
}
