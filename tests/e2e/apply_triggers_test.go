package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// applyTriggersFile is the example of openapi/guide/schedules.md
// ("Several triggers"), as a user would paste it.
const applyTriggersFile = `jobs:
  - name: two-clocks
    triggers:
      - {kind: cron, cron: "0 9 * * 1-5", timezone: Europe/Berlin}
      - {kind: cron, cron: "0 12 * * 6,0", timezone: America/New_York}
    executor: {kind: shell, command: ./report.sh}
`

// TestApplyTriggers: ax apply of a job with several triggers stores the
// list, applying it again changes nothing, and ax job list shows both.
func TestApplyTriggers(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte(applyTriggersFile), 0o644))

	out, err := s.AX(t, "apply", "-f", file)
	require.NoError(t, err, out)
	requireLine(t, out, "created", "two-clocks")
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT jsonb_array_length(triggers) FROM ax.job WHERE name = 'two-clocks'`).Scan(&n))
	require.Equal(t, 2, n)

	out, err = s.AX(t, "apply", "-f", file)
	require.NoError(t, err, out)
	require.Contains(t, out, "1 unchanged (nothing to change)")

	out, err = s.AX(t, "job", "list")
	require.NoError(t, err, out)
	requireLine(t, out, "two-clocks", `cron "0 9 * * 1-5" Europe/Berlin; cron "0 12 * * 6,0" America/New_York`)
}
