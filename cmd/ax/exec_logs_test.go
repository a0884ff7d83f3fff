package main

import (
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi/client"
)

func logEvent(task uuid.UUID, shard, attempt int64, stream, message string) client.TaskEvent {
	return client.TaskEvent{TaskId: task, ShardIndex: shard, Attempt: attempt, Kind: "log", Stream: &stream, Message: &message}
}

// TestLogPrinterJoinsChunksIntoLines: chunks that split lines are joined
// per task, attempt and stream; unfinished lines wait for flush.
func TestLogPrinterJoinsChunksIntoLines(t *testing.T) {
	t.Parallel()
	t0, t1 := uuid.New(), uuid.New()
	var b strings.Builder
	p := newLogPrinter(&b, "table")
	for _, e := range []client.TaskEvent{
		logEvent(t0, 0, 1, "stdout", "one\ntw"),
		logEvent(t1, 1, 1, "stdout", "other "),
		logEvent(t0, 0, 1, "stderr", "warn"),
		logEvent(t0, 0, 1, "stdout", "o\n\nthree"),
		logEvent(t1, 1, 1, "stdout", "shard\n"),
		logEvent(t0, 0, 2, "stdout", "again\n"),
	} {
		require.NoError(t, p.print(e))
	}
	require.Equal(t, "shard 0 [stdout] one\nshard 0 [stdout] two\nshard 0 [stdout] \nshard 1 [stdout] other shard\n"+
		"shard 0 (attempt 2) [stdout] again\n", b.String())
	b.Reset()
	require.NoError(t, p.flush())
	require.Equal(t, "shard 0 [stdout] three\nshard 0 [stderr] warn\n", b.String())
	b.Reset()
	require.NoError(t, p.flush())
	require.Empty(t, b.String(), "flushed once")
}

func TestLogPrinterJSON(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	p := newLogPrinter(&b, "json")
	require.NoError(t, p.print(logEvent(uuid.Nil, 3, 1, "stdout", "no newline")))
	require.NoError(t, p.flush())
	require.Contains(t, b.String(), `"message":"no newline"`)
	require.Equal(t, 1, strings.Count(b.String(), "\n"), "one JSON object a line")
}

func TestFinalStates(t *testing.T) {
	t.Parallel()
	for state, want := range map[client.ExecutionState]bool{
		client.ExecutionStatePending: false, client.ExecutionStateRunning: false,
		client.ExecutionStateSucceeded: true, client.ExecutionStateFailed: true,
		client.ExecutionStateCancelled: true, client.ExecutionStateTimedOut: true,
	} {
		require.Equal(t, want, final(state), state)
	}
}

// With -states, state events print in order with the output, each naming
// the host behind it when the event has one.
func TestLogPrinterStateLines(t *testing.T) {
	t.Parallel()
	task := uuid.New()
	state := func(s, host, ip, msg string) client.TaskEvent {
		return client.TaskEvent{TaskId: task, ShardIndex: 2, Attempt: 1, Kind: client.TaskEventKindState, State: &s,
			WorkerHost: &host, WorkerIp: &ip, Message: &msg}
	}
	var b strings.Builder
	p := newLogPrinter(&b, "table")
	for _, e := range []client.TaskEvent{
		state("leased", "w17", "10.0.3.17", "routed here"),
		logEvent(task, 2, 1, "stdout", "hello\n"),
		state("failed", "w17", "", "exit status 1\nwith a second line"),
		{TaskId: task, ShardIndex: 2, Attempt: 2, Kind: client.TaskEventKindState, State: new("pending")},
	} {
		require.NoError(t, p.print(e))
	}
	require.Equal(t, "shard 2 [state] leased on w17 (10.0.3.17): routed here\nshard 2 [stdout] hello\n"+
		"shard 2 [state] failed on w17: exit status 1 with a second line\nshard 2 (attempt 2) [state] pending\n", b.String())
}
