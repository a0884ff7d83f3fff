package runlog

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// syncBuffer is a log destination the budget's timer may write to while
// the test reads.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	written chan struct{}
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	select {
	case b.written <- struct{}{}:
	default:
	}
	return n, err
}

// Past its lines a second, a budget lets none through and writes one
// summary line when the second ends, counting what it left out by key.
func TestLineBudgetSummarizes(t *testing.T) {
	t.Parallel()
	out := &syncBuffer{written: make(chan struct{}, 1)}
	b := NewLineBudget(slog.New(slog.NewJSONHandler(out, nil)), 5, "left out")
	allowed := 0
	for i := range 100 {
		key := "succeeded"
		if i%4 == 0 {
			key = "failed"
		}
		if b.Allow(key) {
			allowed++
		}
	}
	require.Equal(t, 5, allowed)
	<-out.written // the summary, when the second ends
	out.mu.Lock()
	defer out.mu.Unlock()
	var line map[string]any
	require.NoError(t, json.Unmarshal(out.buf.Bytes(), &line))
	require.Equal(t, "left out", line["msg"])
	require.Equal(t, float64(95), line["left_out"])
	require.Equal(t, "failed=23,succeeded=72", line["by_state"])
}
