package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue/webhook"
)

// schema is the receiver's own: receiver_webhook_message remembers which
// webhook-ids were processed (its unique index is the deduplication), and
// receiver_execution_outcome stands for the business data, deliberately
// append-only so that a duplicate would show as a second row.
//
// Keep message rows for longer than a sender may redeliver a message (ax
// retries for about 13 minutes, and an operator can redeliver on demand
// later): delete old ones on a schedule suited to the business, e.g. after
// 30 days.
const schema = `
CREATE TABLE IF NOT EXISTS receiver_webhook_message (
    webhook_id  text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX IF NOT EXISTS receiver_webhook_message_webhook_id_key
    ON receiver_webhook_message (webhook_id);

CREATE TABLE IF NOT EXISTS receiver_execution_outcome (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id   text        NOT NULL,
    execution_id text,
    job_id       text,
    state        text,
    payload      jsonb       NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);
`

// schemaLockID serializes Migrate across replicas starting together, since
// CREATE … IF NOT EXISTS is not safe against a concurrent twin.
const schemaLockID = 0x7263765f64656d6f // "rcv_demo"

// Receiver records the outcome of each ax execution once, however many
// times its callback arrives.
type Receiver struct {
	pool   *pgxpool.Pool
	logger *slog.Logger

	// beforeCommit, when set, runs between the business write and the
	// commit; tests make it fail to play a crash at the worst moment.
	beforeCommit func(ctx context.Context) error
}

// NewReceiver returns a Receiver that writes to pool.
func NewReceiver(pool *pgxpool.Pool, logger *slog.Logger) *Receiver {
	return &Receiver{pool: pool, logger: logger}
}

// Migrate creates the receiver's tables if they are missing.
func (r *Receiver) Migrate(ctx context.Context) error {
	return pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(schemaLockID)); err != nil {
			return fmt.Errorf("error locking the receiver's schema: %w", err)
		}
		if _, err := tx.Exec(ctx, schema); err != nil {
			return fmt.Errorf("error creating the receiver's tables: %w", err)
		}
		return nil
	})
}

// Handler serves callbacks: verifier checks each request first, then the
// outcome is recorded once per webhook-id. Answers: 200 when processed or
// already processed (a duplicate must not make the sender retry), 401 when
// verification fails, 400 when the body is not JSON, 500 when the database
// fails (the sender retries, and the rolled-back write leaves the id free).
func (r *Receiver) Handler(verifier *webhook.Verifier) http.Handler {
	return verifier.Middleware(http.HandlerFunc(r.serveCallback))
}

// outcome is the part of ax's callback body the receiver keeps in columns;
// the whole body is kept as payload.
type outcome struct {
	ExecutionID *string `json:"execution_id"`
	JobID       *string `json:"job_id"`
	State       *string `json:"state"`
}

func (r *Receiver) serveCallback(w http.ResponseWriter, req *http.Request) {
	ctx := req.Context()
	msg, ok := webhook.MessageFromContext(ctx)
	if !ok {
		http.Error(w, "receiver: request not verified", http.StatusInternalServerError)
		return
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, "receiver: error reading body", http.StatusBadRequest)
		return
	}
	var out outcome
	if err := json.Unmarshal(body, &out); err != nil {
		http.Error(w, "receiver: body is not a JSON object: "+err.Error(), http.StatusBadRequest)
		return
	}
	duplicate, err := r.record(ctx, msg.ID, out, body)
	if err != nil {
		r.logger.ErrorContext(ctx, "receiver: error recording callback", "webhook_id", msg.ID, "error", err)
		http.Error(w, "receiver: error recording callback", http.StatusInternalServerError)
		return
	}
	r.logger.InfoContext(ctx, "receiver: callback", "webhook_id", msg.ID, "duplicate", duplicate)
	if duplicate {
		fmt.Fprintln(w, "duplicate: already processed")
		return
	}
	fmt.Fprintln(w, "processed")
}

// record claims webhookID and writes the outcome in one transaction. When
// the id is taken it writes nothing and reports a duplicate. Two deliveries
// racing are serialized by the unique index: the second waits for the
// first's transaction and then finds the id taken, or free again if the
// first rolled back.
func (r *Receiver) record(ctx context.Context, webhookID string, out outcome, body []byte) (duplicate bool, err error) {
	err = pgx.BeginFunc(ctx, r.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `
            INSERT INTO receiver_webhook_message (webhook_id) VALUES ($1)
            ON CONFLICT (webhook_id) DO NOTHING`, webhookID)
		if err != nil {
			return fmt.Errorf("error claiming webhook id: %w", err)
		}
		if tag.RowsAffected() == 0 {
			duplicate = true
			return nil
		}
		if _, err := tx.Exec(ctx, `
            INSERT INTO receiver_execution_outcome (webhook_id, execution_id, job_id, state, payload)
            VALUES ($1, $2, $3, $4, $5)`, webhookID, out.ExecutionID, out.JobID, out.State, body); err != nil {
			return fmt.Errorf("error writing outcome: %w", err)
		}
		if r.beforeCommit != nil {
			return r.beforeCommit(ctx)
		}
		return nil
	})
	return duplicate, err
}
