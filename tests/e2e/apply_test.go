package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// axStdin runs the CLI against s with stdin and returns its stdout.
func axStdin(t *testing.T, s *e2ekit.Server, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(proctest.Binary(t, "ax"), args...)
	cmd.Env = append(os.Environ(), "AX_SERVER="+s.URL, "AX_API_KEY="+s.Key)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), &e2ekit.CLIError{Err: err, Stderr: stderr.String()}
	}
	return string(out), nil
}

// jobRows reads every job's id, update time, managed_by and pause, by name.
type jobRow struct {
	id, managedBy string
	updatedAt     time.Time
	paused        bool
	pausedReason  string
}

func jobRows(t *testing.T, pool *pgxpool.Pool) map[string]jobRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT j.name, j.id::text, coalesce(j.managed_by, ''), j.updated_at,
		t.paused, coalesce(t.paused_reason, '') FROM ax.job j JOIN ax.trigger t ON t.job_id = j.id`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]jobRow{}
	for rows.Next() {
		var name string
		var r jobRow
		require.NoError(t, rows.Scan(&name, &r.id, &r.managedBy, &r.updatedAt, &r.paused, &r.pausedReason))
		out[name] = r
	}
	require.NoError(t, rows.Err())
	return out
}

// requireLine checks that a line of out holds each of parts, in order.
func requireLine(t *testing.T, out string, parts ...string) {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, p := range parts {
			i := strings.Index(rest, p)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(p):]
		}
		if ok {
			return
		}
	}
	t.Fatalf("no line holds %q in:\n%s", parts, out)
}

const applyFile = `# two jobs of the billing team
name: nightly
group: billing
trigger: {kind: cron, cron: "0 0 2 * * ?", timezone: Europe/Paris}
executor: {kind: shell, command: ./nightly.sh}
params: {n: 12345678901234567890}
---
jobs:
  - name: hourly
    group: billing
    trigger: {kind: interval, interval_seconds: 3600}
    executor: {kind: http, url: "https://billing.example/run"}
    target: {labels: {pool: billing}}
`

// TestApplyFile: ax apply creates a file's jobs, does nothing (and writes
// nothing) when applied again, shows a diff on --dry-run, updates, pauses
// what --prune finds gone, and takes back what ax job get -o yaml prints.
func TestApplyFile(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	file := filepath.Join(t.TempDir(), "jobs.yaml")
	require.NoError(t, os.WriteFile(file, []byte(applyFile), 0o644))

	out, err := s.AX(t, "apply", "-f", file)
	require.NoError(t, err, out)
	requireLine(t, out, "created", "billing/nightly")
	requireLine(t, out, "created", "billing/hourly")
	require.Contains(t, out, "file:jobs.yaml: 2 created")
	created := jobRows(t, pool)
	require.Len(t, created, 2)
	require.Equal(t, "file:jobs.yaml", created["nightly"].managedBy)

	// Again: nothing to change, and nothing written.
	out, err = s.AX(t, "apply", "-f", file)
	require.NoError(t, err, out)
	require.Contains(t, out, "file:jobs.yaml: 2 unchanged (nothing to change)")
	require.Equal(t, created, jobRows(t, pool))

	// A change, on a dry run: the diff, and nothing written.
	changed := strings.Replace(applyFile, "interval_seconds: 3600", "interval_seconds: 600", 1)
	require.NoError(t, os.WriteFile(file, []byte(changed), 0o644))
	out, err = s.AX(t, "apply", "-f", file, "--dry-run")
	require.NoError(t, err, out)
	requireLine(t, out, "updated", "billing/hourly")
	require.Contains(t, out, "trigger.interval_seconds: 3600 → 600")
	require.Contains(t, out, "1 updated, 1 unchanged (dry run: nothing changed)")
	require.Equal(t, created, jobRows(t, pool))

	out, err = s.AX(t, "apply", "-f", file)
	require.NoError(t, err, out)
	require.Contains(t, out, "trigger.interval_seconds: 3600 → 600")
	updated := jobRows(t, pool)
	require.True(t, updated["hourly"].updatedAt.After(created["hourly"].updatedAt))
	require.Equal(t, created["nightly"], updated["nightly"])

	// The file drops nightly: without --prune it is left alone, with it
	// paused (not deleted), with the reason.
	onlyHourly := changed[strings.Index(changed, "jobs:"):]
	require.NoError(t, os.WriteFile(file, []byte(onlyHourly), 0o644))
	out, err = s.AX(t, "apply", "-f", file)
	require.NoError(t, err, out)
	require.NotContains(t, out, "nightly")
	require.False(t, jobRows(t, pool)["nightly"].paused)
	out, err = s.AX(t, "apply", "-f", file, "--prune", "--dry-run")
	require.NoError(t, err, out)
	requireLine(t, out, "paused", "billing/nightly", "left out of declaration set file:jobs.yaml")
	require.False(t, jobRows(t, pool)["nightly"].paused)
	out, err = s.AX(t, "apply", "-f", file, "--prune")
	require.NoError(t, err, out)
	require.Contains(t, out, "paused: false → true")
	pruned := jobRows(t, pool)
	require.True(t, pruned["nightly"].paused)
	require.Contains(t, pruned["nightly"].pausedReason, "left out of declaration set file:jobs.yaml")
	require.Len(t, pruned, 2, "pruning never deletes")

	// The job API shows it, and refuses an edit of a managed job.
	out, err = s.AX(t, "job", "get", pruned["nightly"].id, "-o", "yaml")
	require.NoError(t, err, out)
	require.Contains(t, out, "managed_by: file:jobs.yaml")
	require.Contains(t, out, "n: 12345678901234567890", "params keep every digit")
	_, err = s.AX(t, "job", "delete", pruned["nightly"].id)
	require.Error(t, err)
	require.Contains(t, err.Error(), "409")
	require.Contains(t, err.Error(), "managed by file:jobs.yaml")
	require.Contains(t, err.Error(), "--force", "the CLI names its flag")
	require.NotContains(t, err.Error(), "?force=true", "not the HTTP parameter")

	// Round trip: what get -o yaml (or json) prints, apply takes back
	// unchanged — through stdin, the set named by the output's managed_by.
	for _, format := range []string{"yaml", "json"} {
		got, err := s.AX(t, "job", "get", pruned["hourly"].id, "-o", format)
		require.NoError(t, err, got)
		out, err = axStdin(t, s, got, "apply", "-f", "-")
		require.NoError(t, err, out)
		requireLine(t, out, "unchanged", "billing/hourly")
		require.Contains(t, out, "file:jobs.yaml: 1 unchanged (nothing to change)", format)
	}
	require.Equal(t, pruned, jobRows(t, pool))

	// A list of jobs round-trips too.
	list, err := s.AX(t, "job", "list", "-o", "yaml")
	require.NoError(t, err, list)
	out, err = axStdin(t, s, list, "apply", "-f", "-", "--dry-run")
	require.NoError(t, err, out)
	requireLine(t, out, "unchanged", "billing/hourly")

	// Invalid jobs are refused with the field, by index; nothing changes.
	require.NoError(t, os.WriteFile(file, []byte(onlyHourly+`  - name: broken
    trigger: {kind: cron, cron: "0 0 30 2 *"}
    executor: {kind: shell, command: "true"}
`), 0o644))
	_, err = s.AX(t, "apply", "-f", file)
	require.Error(t, err)
	require.Contains(t, err.Error(), "body.jobs[1].trigger.cron")
	require.Equal(t, pruned, jobRows(t, pool))

	// --force deletes a managed job all the same.
	out, err = s.AX(t, "job", "delete", "--force", pruned["nightly"].id)
	require.NoError(t, err, out)
	require.Contains(t, out, "deleted "+pruned["nightly"].id)
	require.NotContains(t, jobRows(t, pool), "nightly")
}

// `ax job get -o yaml > job.yaml && ax apply -f job.yaml` on a job made by
// hand does not silently make the file its manager: that needs --adopt,
// and the refusal names the flag.
func TestApplyAdoptsOnlyWithAdopt(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "job.json")
	require.NoError(t, os.WriteFile(jobFile, []byte(`{"name":"report","group":"billing",
		"trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"}}`), 0o644))
	_, err := s.AX(t, "job", "create", "-f", jobFile)
	require.NoError(t, err)
	out, err := s.AX(t, "job", "get", "billing/report", "-o", "yaml")
	require.NoError(t, err)
	yamlFile := filepath.Join(dir, "job.yaml")
	require.NoError(t, os.WriteFile(yamlFile, []byte(out), 0o644))

	_, err = s.AX(t, "apply", "-f", yamlFile)
	var cliErr *e2ekit.CLIError
	require.ErrorAs(t, err, &cliErr)
	require.Equal(t, 4, cliErr.Err.(*exec.ExitError).ExitCode(), cliErr.Stderr)
	require.Contains(t, cliErr.Stderr, "--adopt")
	out, err = s.AX(t, "job", "get", "billing/report", "-o", "json")
	require.NoError(t, err)
	require.NotContains(t, out, "managed_by", "a refused apply changes nothing")

	out, err = s.AX(t, "apply", "-f", yamlFile, "--adopt")
	require.NoError(t, err, out)
	require.Contains(t, out, "billing/report")
	out, err = s.AX(t, "job", "get", "billing/report", "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"managed_by": "file:job.yaml"`)
}
