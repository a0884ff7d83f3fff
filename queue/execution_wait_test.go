package queue_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// waitRecheck is queue's fallback re-read interval: a wait that returns
// sooner after its last read was woken by the notification.
const waitRecheck = 2 * time.Second

// lastRead waits until a long poll of this test's database has read its
// execution since since and gone to sleep, and returns when it read it.
// It looks through a connection of its own: one from the pool could be
// the poll's, and its own query would hide the poll's.
func (e *env) lastRead(since time.Time) time.Time {
	e.t.Helper()
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, e.pool.Config().ConnConfig)
	require.NoError(e.t, err)
	defer conn.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var at *time.Time
		require.NoError(e.t, conn.QueryRow(ctx, `SELECT max(state_change) FROM pg_stat_activity
			WHERE datname = current_database() AND state = 'idle' AND state_change > $1
			  AND query LIKE '-- name: ExecutionGetByID %'`, since).Scan(&at))
		if at != nil {
			return *at
		}
		require.True(e.t, time.Now().Before(deadline), "the wait never read its execution")
		time.Sleep(10 * time.Millisecond)
	}
}

func (e *env) clock() time.Time {
	e.t.Helper()
	var now time.Time
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&now))
	return now
}

func TestExecutionWaiterReturnsWhenTheExecutionEnds(t *testing.T) {
	e := setup(t)
	exec := e.trigger(e.job(nil).ID)
	waiter := queue.NewExecutionWaiter(e.pool, e.notifier)
	type result struct {
		exec *axtype.Execution
		at   time.Time
	}
	got := make(chan result, 1)
	since := e.clock()
	go func() {
		ended, err := waiter.Wait(context.Background(), exec.ID, 30*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- result{ended, time.Now()}
	}()
	read := e.lastRead(since)
	_, err := e.execs.Cancel(context.Background(), exec.ID, "end it")
	require.NoError(t, err)

	select {
	case r := <-got:
		require.Equal(t, axtype.ExecutionState("cancelled"), r.exec.State)
		require.True(t, r.at.Before(read.Add(waitRecheck)),
			"woken by the notification, not the re-read %s after the last (returned %s after it)", waitRecheck, r.at.Sub(read))
	case <-time.After(10 * time.Second):
		t.Fatal("the wait did not return when its execution ended")
	}
}

func TestExecutionWaiterReturnsTheExecutionAsItIsWhenTimeRunsOut(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	waiter := queue.NewExecutionWaiter(e.pool, e.notifier)
	exec := e.trigger(e.job(nil).ID)

	start := time.Now()
	got, err := waiter.Wait(ctx, exec.ID, 300*time.Millisecond)
	require.NoError(t, err)
	require.Equal(t, axtype.ExecutionState("pending"), got.State)
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)

	_, err = e.execs.Cancel(ctx, exec.ID, "done")
	require.NoError(t, err)
	start = time.Now()
	got, err = waiter.Wait(ctx, exec.ID, time.Minute)
	require.NoError(t, err)
	require.Equal(t, axtype.ExecutionState("cancelled"), got.State, "an ended execution returns at once")
	require.Less(t, time.Since(start), 10*time.Second)

	_, err = waiter.Wait(ctx, uuid.New(), time.Minute)
	require.ErrorIs(t, err, axtype.ErrNotFound)
}
