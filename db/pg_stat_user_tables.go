package db

import (
	"context"
	"fmt"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/jackc/pgx/v5"
)

// TableDeadTuples returns the live and dead row estimates of ax's tables
// among names, by name (pg_stat_user_tables).
func TableDeadTuples(ctx context.Context, e Executor, names []string) (map[string]axtype.TableRows, error) {
	rows, err := queries.TableDeadTuples(ctx, e, names)
	if err != nil {
		return nil, fmt.Errorf("error reading table statistics: %w", mapErr(err))
	}
	out := make(map[string]axtype.TableRows, len(rows))
	for _, r := range rows {
		out[r.Name] = axtype.TableRows{Live: r.Live, Dead: r.Dead}
	}
	return out, nil
}

// VacuumTable vacuums ax's table name (an identifier, quoted here), or
// skips it when another VACUUM holds it (SKIP_LOCKED: replicas never wait
// for each other). VACUUM runs outside a transaction, so e is a pool or a
// connection, not a transaction; ctx's end cancels it.
func VacuumTable(ctx context.Context, e Executor, name string) error {
	sql := "VACUUM (SKIP_LOCKED) " + pgx.Identifier{"ax", name}.Sanitize()
	if _, err := e.Exec(ctx, sql); err != nil {
		return fmt.Errorf("error vacuuming ax.%s: %w", name, mapErr(err))
	}
	return nil
}
