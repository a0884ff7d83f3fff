package agent

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestStreamWriterKeepsCharactersWhole(t *testing.T) {
	t.Parallel()
	sink := &chunkSink{}
	w := newTaskOutput(TaskRef{TaskID: "t"}, 1<<20, sink.ship).stream(streamStdout)
	text := "naïve café — 日本語 ✓"
	for _, b := range []byte(text) { // one byte per write, as a pipe may deliver
		_, _ = w.Write([]byte{b})
	}
	require.NoError(t, w.Close())
	for _, c := range sink.chunks {
		require.True(t, utf8.ValidString(c.Data), "chunk %q splits a character", c.Data)
	}
	require.Equal(t, text, sink.text(streamStdout))
}

func TestStreamWriterCutsBigWritesIntoChunks(t *testing.T) {
	t.Parallel()
	sink := &chunkSink{}
	w := newTaskOutput(TaskRef{TaskID: "t"}, 1<<30, sink.ship).stream(streamStderr)
	big := strings.Repeat("é", maxChunkBytes) // 2 bytes each: cuts fall mid-character
	_, _ = w.Write([]byte(big))
	require.NoError(t, w.Close())
	require.Greater(t, len(sink.chunks), 1)
	for _, c := range sink.chunks {
		require.LessOrEqual(t, len(c.Data), maxChunkBytes)
		require.True(t, utf8.ValidString(c.Data))
	}
	require.Equal(t, big, sink.text(streamStderr))
}

func TestTaskOutputCapsWhatATaskShips(t *testing.T) {
	t.Parallel()
	sink := &chunkSink{}
	out := newTaskOutput(TaskRef{TaskID: "t"}, 10, sink.ship)
	w := out.stream(streamStdout)
	_, _ = w.Write([]byte("0123456789abcdef"))
	_, _ = w.Write([]byte("more"))
	text := sink.text(streamStdout)
	require.True(t, strings.HasPrefix(text, "0123456789\n[ax-agent: output beyond 10 bytes not shipped]"), text)
	require.NotContains(t, text, "more")
}

func TestTaskOutputNotesDroppedOutput(t *testing.T) {
	t.Parallel()
	var shipped []string
	full := true
	out := newTaskOutput(TaskRef{TaskID: "t"}, 1<<20, func(c LogChunk) bool {
		if full {
			return false
		}
		shipped = append(shipped, c.Data)
		return true
	})
	w := out.stream(streamStdout)
	_, _ = w.Write([]byte("lost line\n"))
	full = false
	_, _ = w.Write([]byte("next\n"))
	require.Equal(t, []string{"[ax-agent: 10 bytes of output dropped, the server was too slow]\nnext\n"}, shipped)
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	t.Parallel()
	tb := &tailBuffer{max: 8}
	_, _ = tb.Write([]byte("abcdef"))
	_, _ = tb.Write([]byte("ghijkl"))
	require.Equal(t, "efghijkl", tb.String())
	tb = &tailBuffer{max: 3}
	_, _ = tb.Write([]byte("xé€")) // the cut falls inside €
	require.True(t, utf8.ValidString(tb.String()))
}

// shipperSetup runs a logShipper whose sends are recorded.
func shipperSetup(t *testing.T, send func([]LogChunk) error, holds func(string) bool) (*logShipper, chan struct{}) {
	t.Helper()
	l := newLogShipper(func(_ context.Context, c []LogChunk) error { return send(c) }, holds, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	stopping := make(chan struct{})
	done := goDone(func() { l.run(ctx, stopping) })
	t.Cleanup(func() { cancel(); <-done })
	return l, stopping
}

func TestLogShipperMergesAndFlushes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var batches [][]LogChunk
	l, _ := shipperSetup(t, func(c []LogChunk) error {
		mu.Lock()
		defer mu.Unlock()
		batches = append(batches, c)
		return nil
	}, func(string) bool { return true })

	ref := TaskRef{TaskID: "t", LeaseToken: "tok"}
	for _, line := range []string{"a\n", "b\n", "c\n"} {
		require.True(t, l.enqueue(LogChunk{TaskID: ref.TaskID, LeaseToken: ref.LeaseToken, Stream: streamStdout, Data: line}))
	}
	l.enqueue(LogChunk{TaskID: ref.TaskID, LeaseToken: ref.LeaseToken, Stream: streamStderr, Data: "oops\n"})
	l.flush(context.Background())

	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, [][]LogChunk{{
		{TaskID: "t", LeaseToken: "tok", Stream: streamStdout, Data: "a\nb\nc\n"},
		{TaskID: "t", LeaseToken: "tok", Stream: streamStderr, Data: "oops\n"},
	}}, batches, "consecutive output of a stream is one chunk; flush sends at once")
}

func TestLogShipperSendsAfterDelayAndDropsLostTasks(t *testing.T) {
	t.Parallel()
	sent := make(chan []LogChunk, 10)
	l, _ := shipperSetup(t, func(c []LogChunk) error { sent <- c; return nil },
		func(id string) bool { return id != "lost" })
	l.enqueue(LogChunk{TaskID: "lost", Stream: streamStdout, Data: "x"})
	l.enqueue(LogChunk{TaskID: "kept", Stream: streamStdout, Data: "y"})
	select {
	case c := <-sent:
		require.Equal(t, []LogChunk{{TaskID: "kept", Stream: streamStdout, Data: "y"}}, c)
	case <-time.After(5 * time.Second):
		t.Fatal("output waited for a flush that never came")
	}
}

func TestLogShipperShipsQueueWhenStopping(t *testing.T) {
	t.Parallel()
	sent := make(chan []LogChunk, 10)
	l, stopping := shipperSetup(t, func(c []LogChunk) error { sent <- c; return nil }, func(string) bool { return true })
	l.enqueue(LogChunk{TaskID: "t", Stream: streamStdout, Data: "last words"})
	close(stopping)
	select {
	case c := <-sent:
		require.Equal(t, "last words", c[0].Data)
	case <-time.After(5 * time.Second):
		t.Fatal("queued output was not shipped on stop")
	}
}
