package agent

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// Output streams of a task.
const (
	streamStdout = "stdout"
	streamStderr = "stderr"
)

// maxChunkBytes is the most data in one log chunk: well under the server's
// 1 MiB per chunk, small enough that output shows up while a task runs.
const maxChunkBytes = 64 << 10

// taskOutput turns a task's output into log chunks. It caps what one task
// ships (a runaway loop printing gigabytes must not flood the server) and,
// when the shipper's queue was full, says how much was dropped rather than
// blocking the task: a task must never stall because the server is slow.
type taskOutput struct {
	ref   TaskRef
	ship  func(LogChunk) bool // false when the chunk could not be queued
	limit int64

	mu      sync.Mutex
	shipped int64
	dropped int64
	capped  bool
}

func newTaskOutput(ref TaskRef, limit int64, ship func(LogChunk) bool) *taskOutput {
	return &taskOutput{ref: ref, ship: ship, limit: limit}
}

// stream returns a writer for one stream. Each stream needs its own writer
// (they keep a partial UTF-8 sequence between writes), and a writer must be
// closed to ship that last partial sequence.
func (o *taskOutput) stream(name string) *streamWriter {
	return &streamWriter{out: o, stream: name}
}

func (o *taskOutput) emit(stream string, data []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.capped || len(data) == 0 {
		return
	}
	text := string(data)
	if room := o.limit - o.shipped; int64(len(data)) > room {
		head, _ := splitAtRune(data[:room])
		text = string(head) + fmt.Sprintf("\n[ax-agent: output beyond %d bytes not shipped]\n", o.limit)
		o.capped = true
	}
	if o.dropped > 0 {
		text = fmt.Sprintf("[ax-agent: %d bytes of output dropped, the server was too slow]\n", o.dropped) + text
	}
	if !o.ship(LogChunk{TaskID: o.ref.TaskID, LeaseToken: o.ref.LeaseToken, Stream: stream, Data: text}) {
		o.dropped += int64(len(data))
		return
	}
	o.shipped += int64(len(data))
	o.dropped = 0
}

// queuedAny says whether the task queued any output: only then must its
// result wait for the shipper.
func (o *taskOutput) queuedAny() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.shipped > 0 || o.capped
}

// streamWriter is the io.Writer of one output stream of a task. It cuts
// output into chunks on UTF-8 boundaries, so that a character split across
// two reads of a pipe survives the trip through JSON.
type streamWriter struct {
	out    *taskOutput
	stream string
	carry  []byte // start of a character whose remaining bytes have not come yet
}

func (w *streamWriter) Write(p []byte) (int, error) {
	data := append(w.carry, p...)
	data, rest := splitAtRune(data)
	w.carry = append([]byte(nil), rest...)
	for len(data) > 0 {
		n := chunkEnd(data, maxChunkBytes)
		w.out.emit(w.stream, data[:n])
		data = data[n:]
	}
	return len(p), nil
}

// Close ships what is left, even an incomplete character.
func (w *streamWriter) Close() error {
	w.out.emit(w.stream, w.carry)
	w.carry = nil
	return nil
}

// splitAtRune splits b before a trailing incomplete UTF-8 sequence.
// Invalid bytes are not held back: only a prefix that may still complete.
func splitAtRune(b []byte) (complete, rest []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return b, nil
			}
			return b[:i], b[i:]
		}
	}
	return b, nil
}

// chunkEnd is where to cut data to at most max bytes without splitting a
// character.
func chunkEnd(data []byte, max int) int {
	if len(data) <= max {
		return len(data)
	}
	for n := max; n > max-utf8.UTFMax && n > 0; n-- {
		if utf8.RuneStart(data[n]) {
			return n
		}
	}
	return max
}

// tailBuffer keeps the last bytes written to it: a failed command's error
// message ends with the end of its stderr.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf[firstRuneStart(t.buf):])
}

// firstRuneStart skips the continuation bytes a tail may begin with.
func firstRuneStart(b []byte) int {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return i
		}
	}
	return 0
}
