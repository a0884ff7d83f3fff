package dispatch_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// A poll that ends while its batch is leasing gets nothing, and the task
// the batch leased for it is handed back at once: pending again, not held
// for an agent that never got it until its lease expires.
func TestAPollThatEndsDuringItsBatchHandsItsTasksBack(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	gate := &leaseGate{leased: make(chan struct{}), release: make(chan struct{})}
	broker := e.brokerTracedBy(gate)
	a := e.agent(nil, nil)
	exec := e.trigger(e.job(nil).ID)

	poll, endPoll := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		tasks, err := broker.Lease(poll, a, 1, 0)
		if len(tasks) > 0 {
			err = nil // fail below: an ended poll must not be answered with tasks
		}
		done <- err
	}()
	<-gate.leased // the batch leased the task and has not committed
	endPoll()
	close(gate.release)
	require.ErrorIs(t, <-done, context.Canceled)

	tasks, err := db.TaskListByExecution(ctx, e.pool, exec.ID)
	require.NoError(t, err)
	require.Len(t, tasks, 1)
	require.Equal(t, axtype.TaskPending, tasks[0].State, "the task is handed back, not left leased")
	require.Equal(t, 1, tasks[0].Attempt, "handing back uses no attempt")
}

// leaseGate holds the first TaskLeaseTake's transaction open after the
// statement, until release is closed.
type leaseGate struct {
	once    sync.Once
	leased  chan struct{}
	release chan struct{}
}

// leaseTakeKey marks the context of a TaskLeaseTake statement.
type leaseTakeKey struct{}

func (g *leaseGate) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	if strings.HasPrefix(data.SQL, "-- name: TaskLeaseTake ") {
		return context.WithValue(ctx, leaseTakeKey{}, true)
	}
	return ctx
}

func (g *leaseGate) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if ctx.Value(leaseTakeKey{}) == nil {
		return
	}
	g.once.Do(func() {
		close(g.leased)
		<-g.release
	})
}
