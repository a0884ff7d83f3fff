package delivery

import (
	"context"
	"errors"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/metrics"
)

var (
	// ErrUnknownHTTPTask means no HTTP task has the id.
	ErrUnknownHTTPTask = errors.New("no http task has this id")
	// ErrStaleCompletion means a completion token is not current: the
	// task's deadline passed (it was timed out and maybe retried with a new
	// token), it was completed already, or it was cancelled.
	ErrStaleCompletion = errors.New("the completion token is not current: the deadline passed, or the task was completed or cancelled")
)

// MaxHTTPResultBytes is the most an HTTP task keeps as its result: of its
// target's response, or of a result posted after a 202.
const MaxHTTPResultBytes = httptask.MaxResultBytes

// TaskCompleter records the results that targets of HTTP tasks post after
// answering 202, whether ax serve or an agent sent the request.
type TaskCompleter struct {
	pool    *pgxpool.Pool
	outbox  *Outbox
	logger  *slog.Logger
	metrics *metrics.Metrics
}

// NewTaskCompleter returns a TaskCompleter; outbox nil enqueues neither
// retries nor callbacks (a replica running River flushes callbacks).
func NewTaskCompleter(pool *pgxpool.Pool, outbox *Outbox, logger *slog.Logger, m *metrics.Metrics) *TaskCompleter {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = metrics.New(nil)
	}
	return &TaskCompleter{pool: pool, outbox: outbox, logger: logger, metrics: m}
}

// Complete records r, fenced by its token (the completion token); it
// returns the task's state afterwards (pending when a failure is retried).
func (c *TaskCompleter) Complete(ctx context.Context, r axtype.TaskResult) (axtype.TaskState, error) {
	st, err := db.TaskGetStatus(ctx, c.pool, r.ID)
	if errors.Is(err, axtype.ErrNotFound) || (err == nil && !st.Agentless && !st.HTTP) {
		return "", ErrUnknownHTTPTask
	}
	if err != nil {
		return "", err
	}
	var done []axtype.CompletedTask
	err = db.WithTx(ctx, c.pool, func(tx pgx.Tx) error {
		var err error
		done, err = completeHTTPTask(ctx, tx, c.outbox, r, st.ExecutionID, st.Attempt, st.Priority, st.Agentless)
		if err == nil && len(done) == 0 {
			err = ErrStaleCompletion
		}
		return err
	})
	if err != nil {
		return "", err
	}
	countTaskResult(c.metrics, done[0])
	c.logger.InfoContext(ctx, "http task result posted", "execution_id", done[0].ExecutionID, "task_id", r.ID,
		"attempt", st.Attempt, "reported", r.State, "state", done[0].State)
	return done[0].State, nil
}

// CheckToken returns nil when token is the current completion token of
// the HTTP task id, ErrUnknownHTTPTask when there is no such task,
// and ErrStaleCompletion when the token is not current. One primary-key
// read: the check made before a posted result's body is read.
func (c *TaskCompleter) CheckToken(ctx context.Context, id, token uuid.UUID) error {
	httpTask, current, err := db.TaskCheckToken(ctx, c.pool, id, token)
	switch {
	case errors.Is(err, axtype.ErrNotFound) || (err == nil && !httpTask):
		return ErrUnknownHTTPTask
	case err != nil:
		return err
	case !current:
		return ErrStaleCompletion
	}
	return nil
}
