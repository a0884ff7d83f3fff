package agent

import (
	"context"
	"log/slog"
	"time"
)

// Batching of log chunks. A batch goes out when it holds logBatchBytes or
// logBatchChunks (the server takes 1,000 chunks and 8 MiB per request), or
// logFlushDelay after its first chunk: a chatty task then costs a few
// requests a second instead of one per line, and output still shows up
// while the task runs.
const (
	logQueueLen    = 4096
	logBatchBytes  = 512 << 10
	logBatchChunks = 500
	logFlushDelay  = 200 * time.Millisecond
	// logSendBudget is how long one batch is retried before it is dropped:
	// output is worth less than results and must not pile up without bound.
	logSendBudget = 30 * time.Second
)

// logShipper sends task output to the server in batches.
type logShipper struct {
	send  func(context.Context, []LogChunk) error // sends one batch, retrying as it sees fit
	holds func(taskID string) bool                // false once a task's lease is gone
	log   *slog.Logger
	queue chan logItem
}

// logItem is a chunk, or a flush request when flushed is set: flushed is
// closed once everything queued before it was sent or given up on.
type logItem struct {
	chunk   LogChunk
	flushed chan struct{}
}

func newLogShipper(send func(context.Context, []LogChunk) error, holds func(string) bool, log *slog.Logger) *logShipper {
	return &logShipper{send: send, holds: holds, log: log, queue: make(chan logItem, logQueueLen)}
}

// enqueue queues a chunk without ever blocking the task that wrote it; it
// returns false when the queue is full.
func (l *logShipper) enqueue(c LogChunk) bool {
	select {
	case l.queue <- logItem{chunk: c}:
		return true
	default:
		return false
	}
}

// flush waits until everything queued so far was sent or given up on, or
// until ctx ends. A task flushes before its result is reported, so that its
// output is stored while its lease token is still current.
func (l *logShipper) flush(ctx context.Context) {
	done := make(chan struct{})
	select {
	case l.queue <- logItem{flushed: done}:
	case <-ctx.Done():
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// run ships batches until stopping is closed (it then ships what is
// queued) or ctx ends.
func (l *logShipper) run(ctx context.Context, stopping <-chan struct{}) {
	var b logBatch
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case it := <-l.queue:
			l.take(ctx, &b, it, timer)
		case <-timer.C:
			l.ship(ctx, &b)
		case <-stopping:
			l.takeQueued(ctx, &b, timer)
			l.ship(ctx, &b)
			return
		case <-ctx.Done():
			return
		}
	}
}

func (l *logShipper) take(ctx context.Context, b *logBatch, it logItem, timer *time.Timer) {
	if it.flushed != nil {
		l.ship(ctx, b)
		close(it.flushed)
		return
	}
	if len(b.chunks) == 0 {
		timer.Reset(logFlushDelay)
	}
	b.add(it.chunk)
	if b.full() {
		l.ship(ctx, b)
	}
}

func (l *logShipper) takeQueued(ctx context.Context, b *logBatch, timer *time.Timer) {
	for {
		select {
		case it := <-l.queue:
			l.take(ctx, b, it, timer)
		default:
			return
		}
	}
}

func (l *logShipper) ship(ctx context.Context, b *logBatch) {
	chunks := b.drain(l.holds)
	if len(chunks) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, logSendBudget)
	defer cancel()
	if err := l.send(ctx, chunks); err != nil {
		l.log.WarnContext(ctx, "dropping task output the server did not take", "chunks", len(chunks), "error", err)
	}
}

// logBatch accumulates chunks, merging consecutive output of one stream.
type logBatch struct {
	chunks []pendingChunk
	bytes  int
}

type pendingChunk struct {
	ref    TaskRef
	stream string
	data   []byte
}

func (b *logBatch) add(c LogChunk) {
	ref := TaskRef{TaskID: c.TaskID, LeaseToken: c.LeaseToken}
	b.bytes += len(c.Data)
	if n := len(b.chunks); n > 0 {
		last := &b.chunks[n-1]
		if last.ref == ref && last.stream == c.Stream && len(last.data)+len(c.Data) <= maxChunkBytes {
			last.data = append(last.data, c.Data...)
			return
		}
	}
	b.chunks = append(b.chunks, pendingChunk{ref: ref, stream: c.Stream, data: []byte(c.Data)})
}

func (b *logBatch) full() bool {
	return b.bytes >= logBatchBytes || len(b.chunks) >= logBatchChunks
}

// drain empties the batch, leaving out output of tasks whose lease is gone.
func (b *logBatch) drain(holds func(string) bool) []LogChunk {
	var out []LogChunk
	for _, c := range b.chunks {
		if holds(c.ref.TaskID) {
			out = append(out, LogChunk{TaskID: c.ref.TaskID, LeaseToken: c.ref.LeaseToken, Stream: c.stream, Data: string(c.data)})
		}
	}
	b.chunks, b.bytes = nil, 0
	return out
}
