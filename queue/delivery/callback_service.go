package delivery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

var (
	// ErrExecutionNotEnded means a callback was asked of an execution that
	// is still pending or running.
	ErrExecutionNotEnded = errors.New("the execution has not ended yet")
	// ErrNoCallbackURL means the execution's job has no callback URL.
	ErrNoCallbackURL = errors.New("the execution's job has no callback URL")
	// ErrNoDelivery means this process does not run callback delivery.
	ErrNoDelivery = errors.New("callback delivery is not configured on this server")
)

// CallbackService shows executions' callbacks and redelivers them.
type CallbackService struct {
	pool         *pgxpool.Pool
	outbox       *Outbox
	showAttempts int
	logger       *slog.Logger
}

// NewCallbackService returns a CallbackService; outbox nil refuses
// redelivery. The execution API shows the last 50 attempts.
func NewCallbackService(pool *pgxpool.Pool, outbox *Outbox, logger *slog.Logger) *CallbackService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &CallbackService{pool: pool, outbox: outbox, showAttempts: CallbackConfig{}.withDefaults().ShowAttempts, logger: logger}
}

// Get returns an execution's callback with its recent attempts, or nil
// when it has none.
func (s *CallbackService) Get(ctx context.Context, executionID uuid.UUID) (*axtype.Callback, error) {
	return db.CallbackGet(ctx, s.pool, executionID, s.showAttempts)
}

// Redeliver starts a new delivery of an ended execution's callback to its
// job's current URL, whatever became of the earlier ones (an older
// delivery still retrying stands down). Errors: axtype.ErrNotFound,
// ErrExecutionNotEnded, ErrNoCallbackURL, ErrNoDelivery.
func (s *CallbackService) Redeliver(ctx context.Context, executionID uuid.UUID) (*axtype.Callback, error) {
	if s.outbox == nil {
		return nil, ErrNoDelivery
	}
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		ref, err := db.CallbackRedeliver(ctx, tx, executionID)
		if errors.Is(err, axtype.ErrNotFound) {
			return s.whyNot(ctx, tx, executionID)
		}
		if err != nil {
			return err
		}
		if _, err := s.outbox.client.InsertTx(ctx, tx, CallbackArgs{ExecutionID: ref.ExecutionID, Delivery: ref.Delivery}, nil); err != nil {
			return fmt.Errorf("error enqueuing redelivery of execution %s: %w", executionID, err)
		}
		s.logger.InfoContext(ctx, "callback redelivery requested", "execution_id", executionID, "delivery", ref.Delivery)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, executionID)
}

// whyNot says why an execution's callback cannot be redelivered.
func (s *CallbackService) whyNot(ctx context.Context, e db.Executor, executionID uuid.UUID) error {
	exec, err := db.ExecutionGetByID(ctx, e, executionID)
	switch {
	case err != nil:
		return err
	case !exec.State.Ended():
		return ErrExecutionNotEnded
	}
	return ErrNoCallbackURL
}
