package db_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
)

// historyPairs are the live tables, their history tables, the views that
// show both, and the alias history_move reads the live table under.
var historyPairs = []struct{ live, history, view, alias string }{
	{"ax.execution", "ax.execution_history", "ax.all_executions", "e"},
	{"ax.task", "ax.task_history", "ax.all_tasks", "t"},
}

// TestHistoryTablesMatchLiveTables: each history table has exactly its
// live table's columns (names, types, order) and retain_until; the views
// over both have the live columns and then retain_until; and
// ax.history_move, ax.history_end and ax.history_end_single copy every
// column, in order.
// A migration that adds a column to a live table but not to its history
// table, or forgets SELECT ax.history_define_move(), or to recreate the
// views, fails here (the subtests show that it would).
func TestHistoryTablesMatchLiveTables(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	require.Empty(t, historyMismatches(t, pool))

	t.Run("ColumnOnlyInLiveTable", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.New(t)
		_, err := pool.Exec(ctx, `ALTER TABLE ax.task ADD COLUMN region text`)
		require.NoError(t, err)
		got := historyMismatches(t, pool)
		require.Len(t, got, 5, "%q", got)
		require.True(t, strings.HasPrefix(got[0], "ax.task_history: columns"), got[0])
		require.True(t, strings.HasPrefix(got[1], "ax.all_tasks: columns"), got[1])
		require.Equal(t, "ax.history_move does not copy the columns of ax.task", got[2])
		require.Equal(t, "ax.history_end does not copy the columns of ax.task", got[3])
		require.Equal(t, "ax.history_end_single does not copy the columns of ax.task", got[4])
	})

	t.Run("MoveNotRedefined", func(t *testing.T) {
		t.Parallel()
		pool := dbtest.New(t)
		_, err := pool.Exec(ctx, `ALTER TABLE ax.execution ADD COLUMN region text;
			ALTER TABLE ax.execution_history ADD COLUMN region text`)
		require.NoError(t, err)
		got := historyMismatches(t, pool)
		require.Len(t, got, 4, "%q", got)
		require.True(t, strings.HasPrefix(got[0], "ax.all_executions: columns"), got[0])
		require.Equal(t, "ax.history_move does not copy the columns of ax.execution", got[1])
		require.Equal(t, "ax.history_end does not copy the columns of ax.execution", got[2])
		require.Equal(t, "ax.history_end_single does not copy the columns of ax.execution", got[3])

		// Redefining the move mends it; the view still lacks the column.
		_, err = pool.Exec(ctx, `SELECT ax.history_define_move()`)
		require.NoError(t, err)
		got = historyMismatches(t, pool)
		require.Len(t, got, 1, "%q", got)
		require.True(t, strings.HasPrefix(got[0], "ax.all_executions: columns"), got[0])
	})
}

// historyMismatches lists how the history tables, the views over both
// and ax.history_move, history_end and history_end_single differ from the live tables' columns; none when
// they agree.
func historyMismatches(t *testing.T, pool *pgxpool.Pool) []string {
	t.Helper()
	var out []string
	def := functionDefinition(t, pool, "ax.history_move(uuid[], timestamptz)")
	endDef := functionDefinition(t, pool, "ax.history_end(uuid[], text[], uuid[], text[], jsonb[], text[], text[])")
	endSingleDef := functionDefinition(t, pool, "ax.history_end_single(uuid[], text[], uuid[], text[], jsonb[], text[], text[])")
	for _, p := range historyPairs {
		live := columnsOf(t, pool, p.live)
		// The history table: the live columns in their order, and
		// retain_until. A column added later by ALTER TABLE comes after
		// retain_until (Postgres only appends), so its place is free.
		hist := columnsOf(t, pool, p.history)
		keyed := slices.Contains(hist, retainUntil)
		if hist = slices.DeleteFunc(hist, func(c string) bool { return c == retainUntil }); !keyed || !slices.Equal(hist, live) {
			out = append(out, fmt.Sprintf("%s: columns besides %q [%s], want [%s]",
				p.history, retainUntil, strings.Join(hist, ", "), strings.Join(live, ", ")))
		}
		// The view: the live columns, then retain_until.
		want := append(live, retainUntil)
		if got := columnsOf(t, pool, p.view); !slices.Equal(got, want) {
			out = append(out, fmt.Sprintf("%s: columns [%s], want [%s]", p.view, strings.Join(got, ", "), strings.Join(want, ", ")))
		}
		// history_move names the columns twice: the history table's in
		// the INSERT, the live table's (aliased) in its SELECT.
		names := namesOf(t, pool, p.live)
		insert := fmt.Sprintf("INSERT INTO %s (%s, retain_until)", p.history, strings.Join(names, ", "))
		selected := make([]string, len(names))
		for i, n := range names {
			selected[i] = p.alias + "." + n
		}
		sel := fmt.Sprintf("SELECT %s, k.until", strings.Join(selected, ", "))
		if !strings.Contains(def, insert) || !strings.Contains(def, sel) {
			out = append(out, "ax.history_move does not copy the columns of "+p.live)
		}
		// history_end inserts every column too (the execution's state and
		// end time are set, not copied).
		if !strings.Contains(endDef, insert) {
			out = append(out, "ax.history_end does not copy the columns of "+p.live)
		}
		if !strings.Contains(endSingleDef, insert) {
			out = append(out, "ax.history_end_single does not copy the columns of "+p.live)
		}
	}
	return out
}

// retainUntil is the column the history tables have besides the live ones.
const retainUntil = "retain_until timestamp with time zone"

// columnsOf lists the columns of a table or view as "name type", in order.
func columnsOf(t *testing.T, pool *pgxpool.Pool, rel string) []string {
	t.Helper()
	return queryStrings(t, pool, `
		SELECT quote_ident(attname) || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, rel)
}

// namesOf lists the column names of a table, quoted as in SQL, in order.
func namesOf(t *testing.T, pool *pgxpool.Pool, rel string) []string {
	t.Helper()
	return queryStrings(t, pool, `
		SELECT quote_ident(attname) FROM pg_attribute
		WHERE attrelid = $1::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum`, rel)
}

func functionDefinition(t *testing.T, pool *pgxpool.Pool, signature string) string {
	t.Helper()
	var def string
	err := pool.QueryRow(context.Background(),
		`SELECT pg_get_functiondef($1::regprocedure)`, signature).Scan(&def)
	require.NoError(t, err)
	return def
}

func queryStrings(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []string {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}
