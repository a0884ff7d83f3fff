package e2e

import (
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
