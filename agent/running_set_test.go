package agent

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// clock is a settable time for the running set's deadlines.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

func setupSet(t *testing.T) (*runningSet, *clock, map[string]context.Context) {
	t.Helper()
	c := &clock{now: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := newRunningSet(c.Now, make(chan struct{}, 1))
	ctxs := map[string]context.Context{}
	for _, id := range []string{"a", "b"} {
		ctx, cancel := context.WithCancelCause(context.Background())
		t.Cleanup(func() { cancel(nil) })
		ctxs[id] = ctx
		s.add(LeasedTask{TaskID: id, LeaseToken: "tok-" + id}, cancel, c.now.Add(30*time.Second))
	}
	return s, c, ctxs
}

func result(id string) TaskResult {
	return TaskResult{TaskID: id, LeaseToken: "tok-" + id, State: StateSucceeded}
}

func TestRunningSetFinishedResultsAreHeldUntilResolved(t *testing.T) {
	t.Parallel()
	s, _, _ := setupSet(t)
	require.True(t, s.finish(result("a")))
	require.Equal(t, 1, s.executingCount())
	require.Len(t, s.refs(), 2, "a lease with an unreported result is still renewed")
	require.Equal(t, []TaskResult{result("a")}, s.takeResults(10, 1<<20))
	require.Empty(t, s.takeResults(10, 1<<20), "a result being sent is not handed out twice")
	s.resolve([]TaskResult{result("a")})
	require.Len(t, s.refs(), 1)
	require.Equal(t, 0, s.pendingResults())
}

func TestRunningSetLostTaskIsNeverReported(t *testing.T) {
	t.Parallel()
	s, _, ctxs := setupSet(t)
	lost := s.lose([]string{"a"}, errLeaseLost)
	require.Len(t, lost, 1)
	require.ErrorIs(t, context.Cause(ctxs["a"]), errLeaseLost)
	require.False(t, s.finish(result("a")))
	require.Empty(t, s.takeResults(10, 1<<20))

	require.True(t, s.finish(result("b")))
	batch := s.takeResults(10, 1<<20)
	s.lose([]string{"b"}, errLeaseLost) // lost before its result was sent
	keep, _, lost := s.reportable(batch)
	require.Empty(t, keep)
	require.Equal(t, []string{"b"}, taskIDs(lost))
}

// A heartbeat that crosses a report finds the lease ended by the result it
// carries: the result is not dropped (and no loss is logged); the report's
// answer decides. Should that report be tried again, the result is left
// out: a result whose lease was lost is never sent.
func TestRunningSetResultInFlightIsNotLostByAHeartbeat(t *testing.T) {
	t.Parallel()
	s, _, _ := setupSet(t)
	require.True(t, s.finish(result("a")))
	require.True(t, s.finish(result("b")))
	batch := s.takeResults(10, 1<<20)
	require.Len(t, batch, 2)

	// The first try to send: both are reportable; then, while it is out,
	// a heartbeat answer says both leases are lost.
	keep, expired, lost := s.reportable(batch)
	require.Len(t, keep, 2)
	require.Empty(t, expired)
	require.Empty(t, lost)
	require.Empty(t, s.lose([]string{"a", "b"}, errLeaseLost), "the report in flight decides")
	require.Len(t, s.refs(), 2, "held until the report is answered")

	// a's report was answered: forgotten. b's failed and is tried again:
	// left out, as lost.
	s.resolve([]TaskResult{result("a")})
	keep, expired, lost = s.reportable([]TaskResult{result("b")})
	require.Empty(t, keep)
	require.Empty(t, expired)
	require.Equal(t, []string{"b"}, taskIDs(lost))
	require.Empty(t, s.refs())

	// The same for a lease that ran out while its result was out.
	s2, c2, _ := setupSet(t)
	require.True(t, s2.finish(result("a")))
	batch = s2.takeResults(10, 1<<20)
	c2.now = c2.now.Add(time.Minute)
	require.Equal(t, []string{"b"}, taskIDs(s2.expire()), "b, executing, is stopped; a's report in flight decides")
	keep, expired, lost = s2.reportable(batch)
	require.Empty(t, keep)
	require.Equal(t, []string{"a"}, taskIDs(expired))
	require.Empty(t, lost)
}

func taskIDs(tasks []LeasedTask) []string {
	var ids []string
	for _, t := range tasks {
		ids = append(ids, t.TaskID)
	}
	return ids
}

func TestRunningSetExpiresUnrenewedLeases(t *testing.T) {
	t.Parallel()
	s, c, ctxs := setupSet(t)
	c.now = c.now.Add(20 * time.Second)
	s.renew([]string{"b"}, c.now.Add(30*time.Second))
	c.now = c.now.Add(15 * time.Second) // a: 35 s without renewal; b: renewed 15 s ago

	expired := s.expire()
	require.Len(t, expired, 1)
	require.Equal(t, "a", expired[0].TaskID)
	require.ErrorIs(t, context.Cause(ctxs["a"]), errLeaseExpired)
	require.NoError(t, ctxs["b"].Err())
	require.Equal(t, []TaskRef{{TaskID: "b", LeaseToken: "tok-b"}}, s.refs())
}

func TestRunningSetIgnoresResultOfEarlierLease(t *testing.T) {
	t.Parallel()
	s, c, _ := setupSet(t)
	s.lose([]string{"a"}, errLeaseLost)
	// The server leases task a to this agent again while the old run is
	// still stopping.
	_, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	s.add(LeasedTask{TaskID: "a", LeaseToken: "tok-a2"}, cancel, c.now.Add(time.Minute))

	require.False(t, s.finish(result("a")), "the old run's result")
	require.True(t, s.finish(TaskResult{TaskID: "a", LeaseToken: "tok-a2", State: StateSucceeded}))
}

func TestRunningSetCancelAndRelease(t *testing.T) {
	t.Parallel()
	s, _, ctxs := setupSet(t)
	require.Len(t, s.cancel([]string{"a"}), 1)
	require.Empty(t, s.cancel([]string{"a"}), "a repeated cancel is not news")
	require.ErrorIs(t, context.Cause(ctxs["a"]), errCancelledByServer)
	require.True(t, s.finish(result("a")), "a cancelled task is reported")

	refs := s.stopForDrain()
	require.Equal(t, []TaskRef{{TaskID: "b", LeaseToken: "tok-b"}}, refs)
	require.ErrorIs(t, context.Cause(ctxs["b"]), errDrained)
	stopped := result("b")
	stopped.State = StateFailed // its handler returned the cancel
	require.False(t, s.finish(stopped), "a task stopped by the drain is not reported")
	require.Equal(t, refs, s.handBackStopped(refs), "it is handed back")
	require.Empty(t, s.handBackStopped(refs), "once")
}

// TestRunningSetDrainReportsTasksThatSucceededAsTheyWereStopped: a
// handler that ends with success as the drain's cancel comes did its
// work: it is reported, not handed back (another agent would run it
// again). One that ignores the cancel is handed back and never reported.
func TestRunningSetDrainReportsTasksThatSucceededAsTheyWereStopped(t *testing.T) {
	t.Parallel()
	s, _, _ := setupSet(t)
	refs := s.stopForDrain()
	require.Len(t, refs, 2)
	require.True(t, s.finish(result("a")), "a succeeded as it was stopped: reported")
	require.Equal(t, []TaskRef{{TaskID: "b", LeaseToken: "tok-b"}}, s.handBackStopped(refs),
		"b still runs (it ignored the cancel): handed back; a is not")
	require.False(t, s.finish(result("b")), "b, handed back, is never reported")
	require.Equal(t, []TaskResult{result("a")}, s.takeResults(10, 1<<20))
}

func TestRunningSetBatchesResultsBySize(t *testing.T) {
	t.Parallel()
	s, _, _ := setupSet(t)
	big := make([]byte, 1000)
	for i := range big {
		big[i] = '1'
	}
	for _, id := range []string{"a", "b"} {
		r := result(id)
		r.Result = big
		require.True(t, s.finish(r))
	}
	require.Len(t, s.takeResults(10, 1500), 1, "the second result would pass the byte limit")
	require.Len(t, s.takeResults(10, 10), 1, "the first result goes whatever its size")
	require.Empty(t, s.takeResults(10, 1500))
}
