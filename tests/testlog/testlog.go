// Package testlog gives tests a logger whose lines are printed only when
// the test fails, and the buffer behind it, which the goroutines of the
// servers, agents and processes a test starts may write at once.
package testlog

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
)

// New returns a text logger at level that keeps its lines and prints them
// under title when t has failed. Writing to a buffer, not to t.Log, keeps
// a straggling goroutine's last line from panicking after the test ended.
func New(t testing.TB, title string, level slog.Level) *slog.Logger {
	buf := &Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s:\n%s", title, buf.String())
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: level}))
}

// Buffer is a bytes.Buffer that many goroutines may write.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
