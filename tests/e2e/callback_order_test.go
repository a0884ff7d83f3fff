package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// sequencedCall is one request a callback receiver got.
type sequencedCall struct {
	execID         string
	header, body   int64 // Ax-Callback-Sequence and the body's sequence
	accepted       bool  // answered 2xx
	acceptedBefore []int64
}

// sequenceSink is a loopback callback receiver that refuses the first
// refuse requests of the run whose callback has sequence refuseSeq.
type sequenceSink struct {
	*httptest.Server
	mu       sync.Mutex
	calls    []sequencedCall
	refused  int
	accepted []int64
}

func newSequenceSink(t *testing.T, refuseSeq int64, refuse int) *sequenceSink {
	t.Helper()
	c := &sequenceSink{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Sequence int64 `json:"sequence"`
		}
		_ = json.Unmarshal(raw, &body)
		header, _ := strconv.ParseInt(r.Header.Get("Ax-Callback-Sequence"), 10, 64)
		c.mu.Lock()
		defer c.mu.Unlock()
		call := sequencedCall{execID: r.Header.Get("webhook-id"), header: header, body: body.Sequence,
			acceptedBefore: append([]int64(nil), c.accepted...)}
		if body.Sequence == refuseSeq && c.refused < refuse {
			c.refused++
			c.calls = append(c.calls, call)
			http.Error(w, "not now", http.StatusServiceUnavailable)
			return
		}
		call.accepted = true
		c.calls = append(c.calls, call)
		c.accepted = append(c.accepted, body.Sequence)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *sequenceSink) snapshot() ([]sequencedCall, []int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sequencedCall(nil), c.calls...), append([]int64(nil), c.accepted...)
}

// runThree makes a job of an agentless HTTP call answered at once with a
// callback to sink, and runs it three times, one run after the other.
func runThree(t *testing.T, s *e2ekit.Server, name, target string, callback map[string]any) []string {
	t.Helper()
	job := s.CreateJob(t, map[string]any{"name": name, "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": target}, "retry": map[string]any{"max_attempts": 1},
		"callback": callback})
	execs := make([]string, 3)
	for i := range execs {
		execs[i] = s.Trigger(t, job)
		require.Equal(t, "succeeded", s.WaitExecution(t, execs[i], 60*time.Second))
	}
	return execs
}

// TestCallbacksOrderedBySequence: a real ax serve, a real receiver on
// loopback that refuses run 1's callback twice. The job asks for ordered
// callbacks, so runs 2 and 3 (ended while run 1's callback waits for its
// retries) are not sent before it: the receiver gets 1, 2, 3, each once
// and in order, with sequences 1, 2, 3 in the header and the body.
func TestCallbacksOrderedBySequence(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true", "AX_CALLBACK_RETRY_SCHEDULE=3s,3s,3s")
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(target.Close)
	sink := newSequenceSink(t, 1, 2)

	execs := runThree(t, s, "ordered-callbacks", target.URL, map[string]any{"url": sink.URL, "ordered": true})

	require.Eventually(t, func() bool { _, acc := sink.snapshot(); return len(acc) == 3 },
		60*time.Second, 50*time.Millisecond, "three callbacks delivered")
	calls, accepted := sink.snapshot()
	require.Equal(t, []int64{1, 2, 3}, accepted, "delivered in sequence order: %+v", calls)
	require.Len(t, calls, 5, "run 1 twice refused, then each run once: %+v", calls)
	for _, c := range calls[:3] {
		require.Equal(t, execs[0], c.execID, "nothing of runs 2 and 3 before run 1 is delivered: %+v", calls)
	}
	for i, c := range calls[2:] {
		require.True(t, c.accepted)
		require.Equal(t, execs[i], c.execID)
		require.Equal(t, int64(i+1), c.header, "Ax-Callback-Sequence")
		require.Equal(t, int64(i+1), c.body, "body sequence")
	}
}

// TestCallbacksUnorderedCarryGapFreeSequences: without ordered, each
// callback goes on its own (runs 2 and 3 need not wait for run 1's
// retries), and every callback, retries included, carries its run's
// sequence: 1, 2, 3 in the header and the body.
func TestCallbacksUnorderedCarryGapFreeSequences(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true", "AX_CALLBACK_RETRY_SCHEDULE=3s,3s,3s")
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(target.Close)
	sink := newSequenceSink(t, 1, 2)

	execs := runThree(t, s, "unordered-callbacks", target.URL, map[string]any{"url": sink.URL})

	require.Eventually(t, func() bool { _, acc := sink.snapshot(); return len(acc) == 3 },
		60*time.Second, 50*time.Millisecond, "three callbacks delivered")
	calls, accepted := sink.snapshot()
	require.ElementsMatch(t, []int64{1, 2, 3}, accepted, "%+v", calls)
	want := map[string]int64{execs[0]: 1, execs[1]: 2, execs[2]: 3}
	for _, c := range calls {
		require.Equal(t, want[c.execID], c.header, "Ax-Callback-Sequence of %s", c.execID)
		require.Equal(t, want[c.execID], c.body, "body sequence of %s", c.execID)
	}
}
