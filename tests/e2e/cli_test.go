package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

func TestMain(m *testing.M) { e2ekit.Main(m) }

func TestCLIJobsAgainstServer(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "job.json")
	require.NoError(t, os.WriteFile(jobFile, []byte(`{
		"name": "breakfast",
		"group": "kitchen",
		"trigger": {"kind": "cron", "cron": "0 0 8 * * ?", "timezone": "Asia/Shanghai"},
		"executor": {"kind": "shell", "command": "make coffee"}
	}`), 0o644))

	out, err := s.AX(t, "job", "create", "-f", jobFile, "-o", "json")
	require.NoError(t, err)
	var created struct {
		ID         string    `json:"id"`
		NextFireAt time.Time `json:"next_fire_at"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &created))
	require.Equal(t, 0, created.NextFireAt.Hour(), "08:00 Shanghai is 00:00 UTC")
	require.True(t, created.NextFireAt.After(time.Now()))

	out, err = s.AX(t, "job", "list")
	require.NoError(t, err)
	require.Contains(t, out, "breakfast")
	require.Contains(t, out, `cron "0 0 8 * * ?" Asia/Shanghai`)
	require.Contains(t, out, created.NextFireAt.UTC().Format("2006-01-02 15:04:05"))

	out, err = s.AX(t, "job", "get", created.ID)
	require.NoError(t, err)
	require.Contains(t, out, "kitchen")

	// Bad input: the CLI shows the field and the reason; nothing is stored.
	require.NoError(t, os.WriteFile(jobFile, []byte(`{"name":"bad","trigger":{"kind":"cron","cron":"0 0 30 2 *"},"executor":{"kind":"shell","command":"x"}}`), 0o644))
	_, err = s.AX(t, "job", "create", "-f", jobFile)
	require.Error(t, err)
	require.Contains(t, err.Error(), "body.trigger.cron")

	// "Why didn't it run at 08:30?": not a tick (08:00 Shanghai is).
	out, err = s.AX(t, "job", "why", created.ID, "--at", "2030-01-02T08:30:00")
	require.NoError(t, err, out)
	require.Contains(t, out, "2030-01-02T08:30:00+08:00 (2030-01-02T00:30:00Z): not_a_tick")
	require.Contains(t, out, "the next tick after it is 2030-01-03T08:00:00+08:00")

	out, err = s.AX(t, "job", "trigger", created.ID, "--params", `{"day":"monday"}`, "-o", "json")
	require.NoError(t, err)
	var exec struct {
		ID     string         `json:"id"`
		Cause  string         `json:"cause"`
		Params map[string]any `json:"params"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &exec))
	require.Equal(t, "manual", exec.Cause)
	require.Equal(t, "monday", exec.Params["day"])
	out, err = s.AX(t, "exec", "get", exec.ID)
	require.NoError(t, err)
	require.Contains(t, out, "manual")
	require.Contains(t, out, "0/1") // the one shard
	out, err = s.AX(t, "exec", "list", "--job", created.ID)
	require.NoError(t, err)
	require.Contains(t, out, exec.ID)
	require.Contains(t, out, "kitchen/breakfast", "the job by its group and name, not its id")
	require.NotContains(t, out, created.ID)
	out, err = s.AX(t, "exec", "cancel", exec.ID)
	require.NoError(t, err)
	require.Contains(t, out, "cancelled")

	out, err = s.AX(t, "job", "pause", created.ID, "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"paused": true`)

	out, err = s.AX(t, "job", "list", "-o", "json", "--all")
	require.NoError(t, err)
	var jobs []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &jobs))
	require.Len(t, jobs, 1)

	out, err = s.AX(t, "job", "delete", created.ID)
	require.NoError(t, err)
	require.Contains(t, out, "deleted")
}

// Keys are managed with nothing but AX_SERVER and an admin AX_API_KEY:
// no DATABASE_URL reaches the CLI.
func TestKeyCommandsOverAPI(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	axAPI := func(key string, args ...string) (string, int) {
		cmd := exec.Command(proctest.Binary(t, "ax"), args...)
		cmd.Env = append(withoutEnv(os.Environ(), "DATABASE_URL", "AX_SERVER", "AX_API_KEY"),
			"AX_SERVER="+s.URL, "AX_API_KEY="+key)
		out, err := cmd.Output()
		if exit, ok := err.(*exec.ExitError); ok {
			return string(out) + string(exit.Stderr), exit.ExitCode()
		}
		require.NoError(t, err)
		return string(out), 0
	}
	out, code := axAPI(s.Key, "key", "create", "--scope", "read", "--name", "dashboard")
	require.Equal(t, 0, code, out)
	readKey := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(readKey, "ax_"))

	list, code := axAPI(s.Key, "key", "list")
	require.Equal(t, 0, code, list)
	require.Contains(t, list, "dashboard")
	require.Contains(t, list, "bootstrap-admin")
	out, code = axAPI(s.Key, "key", "list", "-o", "yaml")
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "name: dashboard")

	// The read key reads but may not write or manage keys (exit 6).
	out, code = axAPI(readKey, "job", "list")
	require.Equal(t, 0, code, out)
	jobFile := filepath.Join(t.TempDir(), "job.json")
	require.NoError(t, os.WriteFile(jobFile, []byte(`{"name":"x","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"x"}}`), 0o644))
	out, code = axAPI(readKey, "job", "create", "-f", jobFile)
	require.Equal(t, 6, code, out)
	require.Contains(t, out, "403")
	_, code = axAPI(readKey, "key", "list")
	require.Equal(t, 6, code)

	var keys []struct {
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	out, code = axAPI(s.Key, "key", "list", "-o", "json")
	require.Equal(t, 0, code, out)
	require.NoError(t, json.Unmarshal([]byte(out), &keys))
	var readID string
	for _, k := range keys {
		if k.Name == "dashboard" {
			readID = k.ID
		}
	}
	require.NotEmpty(t, readID)
	out, code = axAPI(s.Key, "key", "revoke", readID)
	require.Equal(t, 0, code, out)
	require.Contains(t, out, "revoked "+readID)
	out, code = axAPI(readKey, "job", "list")
	require.Equal(t, 6, code, "a revoked key is refused: %s", out)
	out, code = axAPI(s.Key, "key", "revoke", readID)
	require.Equal(t, 3, code, "a revoked key is not found again: %s", out)
	list, _ = axAPI(s.Key, "key", "list")
	require.Regexp(t, `dashboard\s.*revoked`, list)

	// More keys than a page (the API's pages are 1,000 at most): the list
	// follows them to the last.
	pool := e2ekit.OpenPool(t, s.DBURL)
	_, err := pool.Exec(t.Context(), `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes, revoked_at, created_at)
		SELECT 'bulk-' || i, sha256(('bulk-' || i)::bytea), 'ax_bulk', '{read}', now(), now() + i * interval '1 ms'
		FROM generate_series(1, 1200) i`)
	require.NoError(t, err)
	var stored int
	require.NoError(t, pool.QueryRow(t.Context(), "SELECT count(*) FROM ax.api_key").Scan(&stored))
	out, code = axAPI(s.Key, "key", "list", "-o", "json")
	require.Equal(t, 0, code, out)
	keys = nil
	require.NoError(t, json.Unmarshal([]byte(out), &keys))
	require.Equal(t, stored, len(keys), "every key, over two pages")
	require.Equal(t, "bulk-1200", keys[len(keys)-1].Name, "oldest first: the last one inserted, last")
}

// A job is addressed by group/name, or by its bare name where one group
// alone has it, in get, pause, trigger and delete; each class of error
// exits with its own code.
func TestJobByGroupAndName(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	dir := t.TempDir()
	for _, group := range []string{"kitchen", "garden"} {
		file := filepath.Join(dir, group+".json")
		require.NoError(t, os.WriteFile(file, []byte(`{"name":"water","group":"`+group+`",
			"trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"}}`), 0o644))
		_, err := s.AX(t, "job", "create", "-f", file)
		require.NoError(t, err)
	}
	file := filepath.Join(dir, "sweep.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"name":"sweep","group":"kitchen",
		"trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"}}`), 0o644))
	_, err := s.AX(t, "job", "create", "-f", file)
	require.NoError(t, err)

	out, err := s.AX(t, "job", "get", "kitchen/water", "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"group": "kitchen"`)
	out, err = s.AX(t, "job", "get", "sweep", "-o", "yaml")
	require.NoError(t, err, "a bare name one group alone has")
	require.Contains(t, out, "name: sweep")
	out, err = s.AX(t, "job", "pause", "garden/water", "-o", "json")
	require.NoError(t, err)
	require.Contains(t, out, `"paused": true`)
	require.Contains(t, out, `"group": "garden"`)
	out, err = s.AX(t, "job", "trigger", "kitchen/water", "-o", "json")
	require.NoError(t, err)
	var run struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &run))
	out, err = s.AX(t, "exec", "list", "--job", "kitchen/water")
	require.NoError(t, err)
	require.Contains(t, out, run.ID)
	out, err = s.AX(t, "exec", "get", run.ID)
	require.NoError(t, err)
	require.Contains(t, out, "AGENT")
	require.Contains(t, out, "DURATION")
	require.Contains(t, out, "RESULT")

	requireExit := func(code int, args ...string) string {
		t.Helper()
		_, err := s.AX(t, args...)
		var cliErr *e2ekit.CLIError
		require.ErrorAs(t, err, &cliErr, "%v", args)
		exit, ok := cliErr.Err.(*exec.ExitError)
		require.True(t, ok, "%v: %v", args, err)
		require.Equal(t, code, exit.ExitCode(), "%v: %s", args, cliErr.Stderr)
		return cliErr.Stderr
	}
	stderr := requireExit(2, "job", "get", "water")
	require.Contains(t, stderr, "GROUP/NAME", "ambiguous: more than one group has it")
	requireExit(2, "job", "get")
	requireExit(2, "job", "frobnicate")
	requireExit(3, "job", "get", "kitchen/nothing")
	requireExit(3, "exec", "get", "0190a1b2-0000-7000-8000-000000000000")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"name":"bad",
		"trigger":{"kind":"cron","cron":"0 0 30 2 *"},"executor":{"kind":"shell","command":"true"}}`), 0o644))
	stderr = requireExit(7, "job", "create", "-f", filepath.Join(dir, "bad.json"))
	require.Contains(t, stderr, "body.trigger.cron")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dup.json"), []byte(`{"name":"sweep","group":"kitchen",
		"trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"true"}}`), 0o644))
	requireExit(4, "job", "create", "-f", filepath.Join(dir, "dup.json"))
	requireExit(5, "job", "list", "--server", "http://127.0.0.1:1")

	out, err = s.AX(t, "job", "delete", "kitchen/sweep")
	require.NoError(t, err)
	require.Contains(t, out, "deleted kitchen/sweep")
	requireExit(3, "job", "get", "sweep")
}

// withoutEnv drops the variables names from env.
func withoutEnv(env []string, names ...string) []string {
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}
