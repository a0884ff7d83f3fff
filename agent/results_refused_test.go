package agent

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func okHandler(context.Context, Task) (Result, error) { return map[string]int{"ok": 1}, nil }

// TestAgentSplitsARefusedBatch: the server refuses every batch holding one
// result. Before, the agent retried that batch forever and the three other
// results were never recorded; now it splits the batch and the others are
// recorded. A result refused with a 4xx is reported failed with bad_result
// and the server's reason; one the server keeps failing with 500 is given
// up to the lease rules instead, since the fault may be the server's (a
// Postgres restart must not turn a success into a failure).
func TestAgentSplitsARefusedBatch(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusUnprocessableEntity, http.StatusInternalServerError} {
		d := newServerDouble()
		d.refuse = map[string]int{"bad": code}
		a := newTestAgent(t, d, Config{Capacity: 4})
		g := newGate()
		a.Handle("block", g.handle)
		for _, id := range []string{"t1", "bad", "t2", "t3"} {
			d.add(handlerTask(id, "block"))
		}
		start(t, a)
		g.waitStarted(t, 4)
		close(g.open) // the four finish at once, so they go in one batch

		for _, id := range []string{"t1", "t2", "t3"} {
			eventually(t, func() bool { _, ok := d.resultOf(id); return ok }, fmt.Sprintf("%s recorded (%d)", id, code))
			r, _ := d.resultOf(id)
			require.NotEqual(t, ErrorCodeBadResult, r.ErrorCode, id)
		}
		if code == http.StatusInternalServerError {
			eventually(t, func() bool { return !a.running.holds("bad") }, "the result is given up")
			_, ok := d.resultOf("bad")
			require.False(t, ok, "a 500 does not make the task a bad_result failure")
			continue
		}
		eventually(t, func() bool { return d.resultCount() == 4 }, "every result recorded")
		r, _ := d.resultOf("bad")
		require.Equal(t, "failed", r.State)
		require.Equal(t, ErrorCodeBadResult, r.ErrorCode)
		require.Contains(t, r.Error, "server answered 422")
	}
}

// TestAgentGivesUpAResultTheServerKeepsRefusing: even the bad_result
// report is refused (422). The others are recorded, and the refused task
// leaves the heartbeat set, so its lease runs out and the server recovers
// it, instead of the agent renewing it forever.
func TestAgentGivesUpAResultTheServerKeepsRefusing(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	d.refuse, d.refuseReports = map[string]int{"bad": http.StatusUnprocessableEntity}, true
	a := newTestAgent(t, d, Config{Capacity: 4})
	a.Handle("ok", okHandler)
	for _, id := range []string{"t1", "bad", "t2", "t3"} {
		d.add(handlerTask(id, "ok"))
	}
	start(t, a)

	eventually(t, func() bool { return d.resultCount() == 3 }, "the three good results recorded")
	eventually(t, func() bool { return !a.running.holds("bad") }, "the refused task is let go")
	d.set(func(d *serverDouble) { d.heartbeats = nil })
	eventually(t, func() bool {
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.heartbeats) >= 2
	}, "heartbeats go on")
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, hb := range d.heartbeats {
		for _, ref := range hb.Tasks {
			require.NotEqual(t, "bad", ref.TaskID, "the refused task's lease is no longer renewed")
		}
	}
	for _, r := range d.results {
		require.NotEqual(t, "bad", r.TaskID)
	}
}
