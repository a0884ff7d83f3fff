package e2e

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// TestClassCommands: `ax class` creates, shows, degrades, restores and
// deletes a rate class against a real server.
func TestClassCommands(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	out, err := s.AX(t, "class", "create", "billing-db", "--rate", "5", "--burst", "10",
		"--auto-min-priority", "3", "--auto-depth", "100")
	require.NoError(t, err, out)
	require.Contains(t, out, "billing-db")

	out, err = s.AX(t, "class", "degrade", "billing-db", "--min-priority", "5")
	require.NoError(t, err, out)
	out, err = s.AX(t, "class", "get", "billing-db", "-o", "json")
	require.NoError(t, err, out)
	var class map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &class))
	require.EqualValues(t, 5, class["effective_min_priority"])
	require.EqualValues(t, 10, class["tokens"])
	require.EqualValues(t, 100, class["auto_degrade"].(map[string]any)["depth"])

	out, err = s.AX(t, "class", "restore", "billing-db", "-o", "json")
	require.NoError(t, err, out)
	require.NotContains(t, out, "effective_min_priority")

	out, err = s.AX(t, "class", "list")
	require.NoError(t, err, out)
	require.Regexp(t, `billing-db\s+5\s+10\s+10\.0\s+0`, out)

	// Past the count's cap (10,000), the listing says "more than".
	out, err = s.AX(t, "class", "create", "bulk", "--rate", "1", "--burst", "1")
	require.NoError(t, err, out)
	job := s.CreateJob(t, map[string]any{"name": "load", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("true")})
	_, err = e2ekit.OpenPool(t, s.DBURL).Exec(context.Background(), `
		WITH e AS (
			INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
			SELECT gen_random_uuid(), $1, 'manual', now(), 1, 0 FROM generate_series(1, 10001)
			RETURNING id)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds, rate_class)
		SELECT id, $1, 0, 1, 0, 1, 60, 'bulk' FROM e`, job)
	require.NoError(t, err)
	out, err = s.AX(t, "class", "list")
	require.NoError(t, err, out)
	require.Regexp(t, `bulk\s+1\s+1\s+\S+\s+more than 10000\s`, out)

	// Kept to groups: an update that does not name them keeps them, and
	// --any-group opens the class again.
	groupsOf := func() any {
		out, err := s.AX(t, "class", "get", "billing-db", "-o", "json")
		require.NoError(t, err, out)
		var c map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &c))
		return c["groups"]
	}
	out, err = s.AX(t, "class", "update", "billing-db", "--rate", "5", "--groups", "billing,reports")
	require.NoError(t, err, out)
	require.Regexp(t, `billing,reports`, out)
	out, err = s.AX(t, "class", "update", "billing-db", "--rate", "6")
	require.NoError(t, err, out)
	require.Equal(t, []any{"billing", "reports"}, groupsOf(), "an update keeps the class's groups")
	out, err = s.AX(t, "class", "update", "billing-db", "--rate", "6", "--any-group")
	require.NoError(t, err, out)
	require.Nil(t, groupsOf(), "--any-group opens the class")

	out, err = s.AX(t, "class", "create", "bad", "--rate", "5", "--auto-depth", "3")
	require.Error(t, err, "an automatic floor needs its priority")
	_ = out
	out, err = s.AX(t, "class", "delete", "billing-db")
	require.NoError(t, err, out)
	_, err = s.AX(t, "class", "get", "billing-db")
	require.ErrorContains(t, err, "404")
}
