package db

// What only tests use, for the db_test package: migrating step by step
// and planning the lease query. It stays out of the binaries.

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/pressly/goose/v3"
)

// DownTo rolls back to version (0 removes everything).
func (m *Migrator) DownTo(ctx context.Context, version int64) ([]*goose.MigrationResult, error) {
	res, err := m.provider.DownTo(ctx, version)
	if err != nil {
		return res, fmt.Errorf("error migrating down to %d: %w", version, err)
	}
	return res, nil
}

// UpByOne applies the next pending migration.
func (m *Migrator) UpByOne(ctx context.Context) (*goose.MigrationResult, error) {
	if err := m.prepareSchema(ctx); err != nil {
		return nil, err
	}
	res, err := m.provider.UpByOne(ctx)
	if err != nil {
		return res, fmt.Errorf("error migrating up by one: %w", err)
	}
	return res, nil
}

// errExplained stops a query function after its plan was captured.
var errExplained = errors.New("explained, not run")

// explainer is an Executor that plans the first query it is given
// instead of running it (EXPLAIN without ANALYZE changes nothing).
type explainer struct {
	e    Executor
	plan string
}

func (x *explainer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, x.explain(ctx, sql, args)
}

func (x *explainer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return nil, x.explain(ctx, sql, args)
}

func (x *explainer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return errRow{x.explain(ctx, sql, args)}
}

func (x *explainer) explain(ctx context.Context, sql string, args []any) error {
	rows, err := x.e.Query(ctx, "EXPLAIN "+sql, args...)
	if err != nil {
		return err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	x.plan = strings.Join(lines, "\n")
	return errExplained
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// TaskLeasePlan returns the query plan TaskLeasePick would use for p, so
// tests can check that claiming stays index-driven on a large backlog.
func TaskLeasePlan(ctx context.Context, e Executor, p *TaskLeasePickParams) (string, error) {
	pick, err := pickParams(p)
	if err != nil {
		return "", err
	}
	x := &explainer{e: e}
	if _, err := queries.TaskLeasePick(ctx, x, pick); !errors.Is(err, errExplained) {
		return "", fmt.Errorf("error explaining TaskLeasePick: %w", err)
	}
	return x.plan, nil
}

// MapErrForTest is mapErr: what callers get of a driver's error.
func MapErrForTest(err error) error { return mapErr(err) }
