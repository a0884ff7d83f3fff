package db

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// storableResults returns results with each one whose result or error
// Postgres cannot store replaced by a failure with ErrorCodeBadResult and
// the reason (one statement carries a whole batch, and a single value
// jsonb refuses would fail every result in it), and each whose result is
// larger than axtype.MaxResultBytes by one with ErrorCodeResultTooLarge
// (checked first: nothing of it is read). results is not changed.
func storableResults(results []axtype.TaskResult) []axtype.TaskResult {
	out := results
	for i, r := range results {
		var bad axtype.TaskResult
		if len(r.Result) > axtype.MaxResultBytes {
			bad = axtype.TaskResult{TaskRef: r.TaskRef, State: axtype.TaskFailed, ErrorCode: axtype.ErrorCodeResultTooLarge,
				Error: fmt.Sprintf("the task's result is %d bytes, more than the %d a result may be", len(r.Result), axtype.MaxResultBytes)}
		} else if reason := unstorableReason(r); reason != "" {
			bad = badResult(r, reason)
		} else {
			continue
		}
		if &out[0] == &results[0] {
			out = slices.Clone(results)
		}
		out[i] = bad
	}
	return out
}

func unstorableReason(r axtype.TaskResult) string {
	if len(r.Result) > 0 {
		if err := axtype.CheckStorableJSON(r.Result); err != nil {
			return "the result " + err.Error()
		}
	}
	if err := axtype.CheckStorableText(r.Error); err != nil {
		return "the error " + err.Error()
	}
	return ""
}

// badResult is r recorded as a failure that says why its result could
// not be stored; it is not retried (see ErrorCodeBadResult).
func badResult(r axtype.TaskResult, reason string) axtype.TaskResult {
	return axtype.TaskResult{TaskRef: r.TaskRef, State: axtype.TaskFailed, ErrorCode: axtype.ErrorCodeBadResult,
		Error: StorableText("cannot store the task's result: " + reason)}
}

// StorableText returns s as Postgres text can hold it: invalid UTF-8
// becomes U+FFFD and a NUL character becomes U+2400 (␀), visible where
// it was.
func StorableText(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\u2400")
}

// taskCompleteRows runs TaskComplete for results. Inside a transaction it
// runs in a savepoint, so that a data exception (SQLSTATE class 22: a
// value Postgres refuses that storableResults did not foresee) costs only
// the results that cause it: each result is then tried alone, in a
// savepoint rolled back at once, and those Postgres refuses are recorded
// as bad_result failures with its message. One savepoint costs two round
// trips a batch. It returns the results as written.
func taskCompleteRows(ctx context.Context, e Executor, agents []uuid.UUID, results []axtype.TaskResult, now *time.Time) ([]dbsqlc.TaskCompleteRow, []axtype.TaskResult, error) {
	tx, ok := e.(pgx.Tx)
	if !ok {
		rows, err := queries.TaskComplete(ctx, e, taskCompleteParams(agents, results, now))
		return rows, results, err
	}
	rows, err := inSavepoint(ctx, tx, true, func(sp pgx.Tx) ([]dbsqlc.TaskCompleteRow, error) {
		return queries.TaskComplete(ctx, sp, taskCompleteParams(agents, results, now))
	})
	if dataException(err) == nil {
		return rows, results, err
	}
	results = slices.Clone(results)
	try := func(i int, r axtype.TaskResult) error {
		_, err := inSavepoint(ctx, tx, false, func(sp pgx.Tx) ([]dbsqlc.TaskCompleteRow, error) {
			return queries.TaskComplete(ctx, sp, taskCompleteParams(agents[i:i+1], []axtype.TaskResult{r}, now))
		})
		return err
	}
	for i, r := range results {
		err := try(i, r)
		pgErr := dataException(err)
		if pgErr == nil {
			if err != nil {
				return nil, nil, err
			}
			continue
		}
		// Only what the agent sent is made a failure: a result refused
		// without its result and error too (a state the database does not
		// know) is the caller's mistake, and fails the call.
		bare := r
		bare.Result, bare.Error = nil, ""
		if err := try(i, bare); err != nil {
			return nil, nil, err
		}
		results[i] = badResult(r, "Postgres refused it: "+pgErr.Message)
	}
	rows, err = queries.TaskComplete(ctx, tx, taskCompleteParams(agents, results, now))
	return rows, results, err
}

// badResultErrors maps the tasks among written (sent as sent, in the same
// order) that failed with ErrorCodeBadResult, or with
// ErrorCodeResultTooLarge in place of what was sent, to their error: an
// agent that reported result_too_large itself is not told of it again.
func badResultErrors(sent, written []axtype.TaskResult) map[uuid.UUID]string {
	var m map[uuid.UUID]string
	for i, r := range written {
		if r.ErrorCode == axtype.ErrorCodeBadResult ||
			r.ErrorCode == axtype.ErrorCodeResultTooLarge && sent[i].ErrorCode != axtype.ErrorCodeResultTooLarge {
			if m == nil {
				m = map[uuid.UUID]string{}
			}
			m[r.ID] = r.Error
		}
	}
	return m
}

// inSavepoint runs f in a savepoint of tx, released when keep and f
// succeeded, rolled back otherwise.
func inSavepoint[T any](ctx context.Context, tx pgx.Tx, keep bool, f func(pgx.Tx) (T, error)) (T, error) {
	var zero T
	sp, err := tx.Begin(ctx)
	if err != nil {
		return zero, fmt.Errorf("error opening a savepoint: %w", err)
	}
	v, err := f(sp)
	if err != nil || !keep {
		if rbErr := sp.Rollback(ctx); rbErr != nil && err == nil {
			return zero, rbErr
		}
		return v, err
	}
	return v, sp.Commit(ctx)
}

// dataException returns err's Postgres error when it is of class 22 (data
// exception: invalid input syntax, untranslatable character, numeric
// value out of range…).
func dataException(err error) *pgconn.PgError {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22") {
		return pgErr
	}
	return nil
}

func taskCompleteParams(agents []uuid.UUID, results []axtype.TaskResult, now *time.Time) dbsqlc.TaskCompleteParams {
	p := dbsqlc.TaskCompleteParams{AgentIds: agents, Now: now}
	for _, r := range results {
		p.TaskIds = append(p.TaskIds, r.ID)
		p.Tokens = append(p.Tokens, r.Token)
		p.States = append(p.States, string(r.State))
		p.Results = append(p.Results, []byte(r.Result))
		p.Errors = append(p.Errors, r.Error)
		p.ErrorCodes = append(p.ErrorCodes, r.ErrorCode)
	}
	return p
}
