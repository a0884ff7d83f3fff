package queue

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
)

// waitRecheck is how often a long poll reads its execution again without
// a notification: a lost notification delays the answer by this much at
// most.
const waitRecheck = 2 * time.Second

// ExecutionWaiter long-polls executions until they end, woken by the
// database's ax_execution_ended notification for that execution (through
// the replica's one LISTEN connection), with a periodic re-read as a
// fallback.
type ExecutionWaiter struct {
	pool     *pgxpool.Pool
	notifier *notify.Notifier
}

// NewExecutionWaiter returns a waiter; notifier nil (or not listening on
// notify.ExecutionEndedChannel) leaves only the periodic re-read.
func NewExecutionWaiter(pool *pgxpool.Pool, notifier *notify.Notifier) *ExecutionWaiter {
	return &ExecutionWaiter{pool: pool, notifier: notifier}
}

// Wait returns the execution once it has ended, or as it is when wait
// runs out or ctx ends.
func (w *ExecutionWaiter) Wait(ctx context.Context, id uuid.UUID, wait time.Duration) (*axtype.Execution, error) {
	var wake <-chan struct{}
	if w.notifier != nil {
		var unsubscribe func()
		wake, unsubscribe = w.notifier.SubscribeKey(notify.ExecutionEndedChannel, id.String())
		defer unsubscribe() // subscribed before the first read: no end slips between
	}
	deadline := time.Now().Add(wait)
	for {
		exec, err := db.ExecutionGetByID(ctx, w.pool, id)
		if err != nil || exec.State.Ended() {
			return exec, err
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || ctx.Err() != nil {
			return exec, nil
		}
		notify.Sleep(ctx, min(remaining, waitRecheck), wake, nil)
	}
}
