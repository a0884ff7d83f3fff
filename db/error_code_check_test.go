package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestErrorCodeCheckMatchesRule: the error-code rule has one definition,
// axtype.ValidErrorCode. Every task_error_code_format check in the
// migrated schema holds the column to axtype.ErrorCodePattern, and
// Postgres's reading of that pattern agrees with ValidErrorCode on codes
// at and past each edge of the rule.
func TestErrorCodeCheckMatchesRule(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	rows, err := pool.Query(ctx, `
		SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conname = 'task_error_code_format' ORDER BY 1`)
	require.NoError(t, err)
	checks := map[string]string{}
	for rows.Next() {
		var table, def string
		require.NoError(t, rows.Scan(&table, &def))
		checks[table] = def
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, checks, "no task_error_code_format check in the schema")
	for table, def := range checks {
		require.Contains(t, def, "error_code ~ '"+axtype.ErrorCodePattern+"'", "check of %s", table)
	}
	codes := []string{
		"exit_3", "signal_killed", "http_503", "quota.exceeded-v2", "a", strings.Repeat("a", axtype.MaxErrorCodeLength),
		"", strings.Repeat("a", axtype.MaxErrorCodeLength+1), "Exit_3", "exit 3", "café", "a/b", "exit_3\n", "a+b", "_", ".-",
	}
	for _, code := range codes {
		var matches bool
		require.NoError(t, pool.QueryRow(ctx, "SELECT $1::text ~ $2::text", code, axtype.ErrorCodePattern).Scan(&matches))
		require.Equal(t, matches, axtype.ValidErrorCode(code), "%q", code)
	}
}
