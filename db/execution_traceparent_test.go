package db_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
)

// traceparentRegex is the rule execution_traceparent_format held before
// migration 00037, which states it without bounded repeats.
const traceparentRegex = `^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`

// TestTraceparentCheckKeepsItsRule: the run's traceparent constraint
// accepts exactly what the regular expression it replaced accepted, over
// a valid traceparent and every one-character change, deletion and
// insertion of it (hex digits of either case, dashes, other characters),
// and a few whole values.
func TestTraceparentCheckKeepsItsRule(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var runID string
	err := pool.QueryRow(ctx, `
		WITH j AS (
		    INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		    VALUES ('traceparent', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id
		)
		INSERT INTO ax.execution (job_id, cause, scheduled_for, shard_count, priority)
		SELECT id, 'manual', now(), 1, 0 FROM j RETURNING id::text`).Scan(&runID)
	require.NoError(t, err)

	const valid = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	candidates := []string{valid, "", "00", "00-", "00--", "00---", strings.ToUpper(valid),
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-", valid + valid,
		"00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01", // a dash one place early
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b-701", // the last dash one place early
		"00-4bf92f3577b34da6a3ce929d0e0e4736--0f067aa0ba902b7-01", // an extra dash, length kept
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0é", // a two-byte character
	}
	for i := range valid {
		for _, c := range []string{"0", "9", "a", "f", "g", "A", "F", "-", "x", " ", "\n"} {
			candidates = append(candidates, valid[:i]+c+valid[i+1:], valid[:i]+c+valid[i:])
		}
		candidates = append(candidates, valid[:i]+valid[i+1:])
	}
	// Each candidate is tried in the database (one round trip for all):
	// accepts says whether the update passed the constraint.
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(ctx, `
		CREATE FUNCTION pg_temp.accepts(tp text, run uuid) RETURNS boolean LANGUAGE plpgsql AS $$
		DECLARE
		    refused_by text;
		BEGIN
		    UPDATE ax.execution SET traceparent = tp WHERE id = run;
		    RETURN true;
		EXCEPTION WHEN check_violation THEN
		    GET STACKED DIAGNOSTICS refused_by = CONSTRAINT_NAME;
		    IF refused_by <> 'execution_traceparent_format' THEN
		        RAISE;
		    END IF;
		    RETURN false;
		END $$`)
	require.NoError(t, err)
	rows, err := conn.Query(ctx, `
		SELECT tp, tp ~ $3::text AS old_rule, pg_temp.accepts(tp, $2::uuid) AS accepted
		FROM unnest($1::text[]) AS tp`, candidates, runID, traceparentRegex)
	require.NoError(t, err)
	tried := 0
	for rows.Next() {
		var tp string
		var oldRule, accepted bool
		require.NoError(t, rows.Scan(&tp, &oldRule, &accepted))
		require.Equal(t, oldRule, accepted, "traceparent %q: accepted %t, the old rule says %t", tp, accepted, oldRule)
		tried++
	}
	require.NoError(t, rows.Err())
	require.Equal(t, len(candidates), tried)
	// No trace context at all is allowed, as before.
	_, err = pool.Exec(ctx, `UPDATE ax.execution SET traceparent = NULL WHERE id = $1::uuid`, runID)
	require.NoError(t, err)
}
