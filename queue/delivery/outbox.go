package delivery

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// outboxBatch bounds the callbacks one Flush enqueues.
const outboxBatch = 1000

// Outbox inserts River jobs in the transaction of the change that causes
// them: the delivery of a callback when an execution ends, the request of
// an agentless HTTP task when it is made. The database writes a callback's
// outbox row in the transaction that ends its execution; Flush turns the
// rows of the caller's transaction into River jobs before it commits. A
// nil *Outbox (no River in this process) inserts nothing: the rows wait
// for the periodic flush of a replica that runs River.
type Outbox struct {
	client *river.Client[pgx.Tx]
	logger *slog.Logger
}

// Flush inserts, in tx, the delivery jobs of the callbacks not enqueued
// yet: those of executions tx ended and any that a path without a hook
// left behind. Call it last in every transaction that may end executions.
func (o *Outbox) Flush(ctx context.Context, tx pgx.Tx) error {
	if o == nil {
		return nil
	}
	if err := o.flushNotices(ctx, tx); err != nil {
		return err
	}
	refs, err := db.CallbackTakeUnenqueued(ctx, tx, outboxBatch)
	if err != nil || len(refs) == 0 {
		return err
	}
	params := make([]river.InsertManyParams, len(refs))
	for i, r := range refs {
		params[i] = river.InsertManyParams{Args: CallbackArgs{ExecutionID: r.ExecutionID, Delivery: r.Delivery}}
	}
	if _, err := o.client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("error enqueuing %d callbacks: %w", len(refs), err)
	}
	return nil
}

// flushNotices inserts, in tx, the delivery jobs of the failure notices
// not enqueued yet: those the runs tx ended opened or closed (the
// database's triggers write them), and any left behind.
func (o *Outbox) flushNotices(ctx context.Context, tx pgx.Tx) error {
	ids, err := db.NoticeTakeUnenqueued(ctx, tx, outboxBatch)
	if err != nil || len(ids) == 0 {
		return err
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: NoticeArgs{ID: id}}
	}
	if _, err := o.client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("error enqueuing %d notices: %w", len(ids), err)
	}
	return nil
}

// Cancelled ends the agentless tasks of executions tx cancelled while
// their request was outstanding (no agent will report them), then flushes.
func (o *Outbox) Cancelled(ctx context.Context, tx pgx.Tx) error {
	if o == nil {
		return nil
	}
	if err := db.TaskCancelAgentless(ctx, tx); err != nil {
		return err
	}
	return o.Flush(ctx, tx)
}

// Fired takes the tasks a fire just made in e: it enqueues the agentless
// ones, ends what the fire cancelled (concurrency policy replace) and
// flushes callbacks (a broadcast that found no agent ends at once).
func (o *Outbox) Fired(ctx context.Context, e db.Executor, tasks []*axtype.NewTask) error {
	if o == nil {
		return nil
	}
	var agentless []*axtype.NewTask
	for _, t := range tasks {
		if t.Agentless {
			agentless = append(agentless, t)
		}
	}
	tx, ok := e.(pgx.Tx)
	if !ok {
		return fmt.Errorf("error enqueuing http tasks: fires must be made in a transaction")
	}
	if err := o.insertHTTPTasks(ctx, tx, agentless); err != nil {
		return err
	}
	return o.Cancelled(ctx, tx)
}

// insertHTTPTasks enqueues the first attempt of each agentless task, at
// its priority.
func (o *Outbox) insertHTTPTasks(ctx context.Context, tx pgx.Tx, tasks []*axtype.NewTask) error {
	if len(tasks) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(tasks))
	for i, t := range tasks {
		ids[i] = t.ID
	}
	priorities, err := db.TaskGetPriorities(ctx, tx, ids)
	if err != nil {
		return err
	}
	params := make([]river.InsertManyParams, len(tasks))
	for i, t := range tasks {
		params[i] = river.InsertManyParams{Args: HTTPTaskArgs{TaskID: t.ID, Attempt: 1, ExecutionID: t.ExecutionID},
			InsertOpts: httpTaskOpts(priorities[t.ID])}
	}
	if _, err := o.client.InsertManyTx(ctx, tx, params); err != nil {
		return fmt.Errorf("error enqueuing %d http tasks: %w", len(tasks), err)
	}
	for _, t := range tasks {
		o.logger.DebugContext(ctx, "http task enqueued", "execution_id", t.ExecutionID, "task_id", t.ID, "job_id", t.JobID)
	}
	return nil
}

// insertHTTPAttempt enqueues a later attempt of an agentless task of
// priority (after a retry was scheduled); a job for that attempt that
// exists already is kept.
func (o *Outbox) insertHTTPAttempt(ctx context.Context, tx pgx.Tx, args HTTPTaskArgs, priority int) error {
	if o == nil {
		return nil
	}
	if _, err := o.client.InsertTx(ctx, tx, args, httpTaskOpts(priority)); err != nil {
		return fmt.Errorf("error enqueuing attempt %d of http task %s: %w", args.Attempt, args.TaskID, err)
	}
	return nil
}
