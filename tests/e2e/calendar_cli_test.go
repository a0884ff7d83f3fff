package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// exitCodeOf is the exit status of a failed ax run.
func exitCodeOf(t *testing.T, err error) int {
	t.Helper()
	var ce *e2ekit.CLIError
	require.ErrorAs(t, err, &ce)
	var ee *exec.ExitError
	require.ErrorAs(t, ce.Err, &ee)
	return ee.ExitCode()
}

// TestCalendarCommands: `ax calendar` creates, shows, lists, applies and
// deletes a calendar against a real server, with -o json and yaml and
// the CLI's exit codes for refused input, a calendar in use and a missing
// one.
func TestCalendarCommands(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	out, err := s.AX(t, "calendar", "create", "cn-holidays", "--timezone", "Asia/Shanghai",
		"--date", "2026-12-25", "--range", "2026-10-01..2026-10-07", "--yearly", "01-01")
	require.NoError(t, err, out)
	require.Regexp(t, `cn-holidays\s+Asia/Shanghai\s+3\s+1`, out)
	require.Contains(t, out, "2026-10-01..2026-10-07")

	out, err = s.AX(t, "calendar", "get", "cn-holidays", "-o", "json")
	require.NoError(t, err, out)
	var cal map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &cal))
	require.Equal(t, "Asia/Shanghai", cal["timezone"])
	require.Equal(t, map[string]any{"yearly": "01-01"}, cal["entries"].([]any)[2])

	// apply replaces an existing calendar and creates a new one.
	file := filepath.Join(t.TempDir(), "calendars.yaml")
	require.NoError(t, os.WriteFile(file, []byte(`name: cn-holidays
timezone: Asia/Shanghai
entries:
  - date: "2026-12-26"
---
name: plant-shutdown
entries:
  - {from: "2027-07-01", to: "2027-07-14"}
`), 0o600))
	out, err = s.AX(t, "calendar", "apply", "-f", file)
	require.NoError(t, err, out)
	out, err = s.AX(t, "calendar", "list")
	require.NoError(t, err, out)
	require.Regexp(t, `cn-holidays\s+Asia/Shanghai\s+1\s+2`, out)
	require.Regexp(t, `plant-shutdown\s+UTC\s+1\s+1`, out)
	out, err = s.AX(t, "calendar", "list", "-o", "yaml")
	require.NoError(t, err, out)
	require.Contains(t, out, "name: plant-shutdown")

	out, err = s.AX(t, "calendar", "create", "bad", "--date", "2026-13-01")
	require.Equal(t, 7, exitCodeOf(t, err), "422 naming the field: %s", out)
	require.ErrorContains(t, err, "body.entries[0].date")
	_, err = s.AX(t, "calendar", "create", "bad", "--range", "2026-01-01")
	require.Equal(t, 2, exitCodeOf(t, err), "a range without .. is a usage error")

	// A job excludes it: delete is refused (409, exit 4) naming the job.
	job := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(job, []byte(`{"name": "settlement",
 "trigger": {"kind": "cron", "cron": "0 0 18 * * *"},
 "executor": {"kind": "shell", "command": "true"},
 "exclude": ["cn-holidays"]}`), 0o600))
	out, err = s.AX(t, "job", "create", "-f", job)
	require.NoError(t, err, out)
	_, err = s.AX(t, "calendar", "delete", "cn-holidays")
	require.Equal(t, 4, exitCodeOf(t, err))
	require.ErrorContains(t, err, "default/settlement")

	out, err = s.AX(t, "calendar", "delete", "plant-shutdown")
	require.NoError(t, err, out)
	_, err = s.AX(t, "calendar", "get", "plant-shutdown")
	require.Equal(t, 3, exitCodeOf(t, err))
}
