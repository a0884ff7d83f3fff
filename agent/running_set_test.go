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
	s.lose([]string{"b"}, errLeaseLost) // lost while its result waited
	keep, _ := s.reportable(batch)
	require.Empty(t, keep)
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

	refs := s.releaseRunning()
	require.Equal(t, []TaskRef{{TaskID: "b", LeaseToken: "tok-b"}}, refs)
	require.ErrorIs(t, context.Cause(ctxs["b"]), errDrained)
	require.False(t, s.finish(result("b")), "a released task is not reported")
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
