package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestWebConsole: Chromium headless, driven by Playwright
// (tests/e2e/console/console.mjs), uses the web console of a real ax serve
// with two real agents. With a read key it sees jobs, fires and runs but
// is shown no action, and an action it posts anyway is refused (403).
// With an admin key it sees a cron job's next fire times in its timezone
// and UTC, triggers it with params, watches its logs arrive live while it
// runs and its state reach succeeded, pauses and resumes it, cancels a
// running execution, redelivers a callback that failed for good (the
// receiver is healed first), degrades and restores a rate class, drains
// an agent, and logs out. Screenshots of every page go to
// AX_CONSOLE_SHOTS, or to a folder under the system's temp dir that the
// test names in its log and leaves in place.
func TestWebConsole(t *testing.T) {
	t.Parallel()
	dir := consoleTestDir(t)
	node, chromium := requireBrowser(t, dir)
	var healed atomic.Bool
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/heal":
			healed.Store(true)
			w.WriteHeader(http.StatusNoContent)
		case healed.Load():
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(receiver.Close)

	s := startServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true",
		// Agents hear of a cancel at their next heartbeat; a callback that
		// fails twice is callback_failed at once.
		"AX_HEARTBEAT_INTERVAL=1s", "AX_LEASE=10s", "AX_CALLBACK_RETRY_SCHEDULE=100ms")
	s.runAgent(t, "console-runner", s.url)
	s.runAgent(t, "console-spare", s.url)
	s.agentReady(t, "console-runner")
	s.agentReady(t, "console-spare")
	readKey, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.url, "--key", s.key, "create", "--scope", "read").Output()
	require.NoError(t, err)

	shell := func(cmd string) map[string]any { return map[string]any{"kind": "shell", "command": cmd} }
	job := s.createJob(t, map[string]any{"name": "report", "group": "billing", "owner": "team-billing",
		"trigger":  map[string]any{"kind": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
		"executor": shell(`for i in 1 2 3; do echo "report line $i"; sleep 2; done`)})
	slow := s.createJob(t, map[string]any{"name": "slow", "group": "ops", "trigger": map[string]any{"kind": "manual"},
		"executor": shell("echo started; sleep 120")})
	notify := s.createJob(t, map[string]any{"name": "notify", "group": "ops", "trigger": map[string]any{"kind": "manual"},
		"executor": shell("echo notified"), "callback": map[string]any{"url": receiver.URL + "/hook"}})
	status, out := s.api(t, "POST", "/v1/classes", map[string]any{"name": "billing-db", "rate": 10, "burst": 10})
	require.Equal(t, http.StatusCreated, status, out)

	shots := consoleShots(t)
	proc := proctest.Start(t, node, []string{
		"AX_URL=" + s.url, "AX_READ_KEY=" + strings.TrimSpace(string(readKey)), "AX_ADMIN_KEY=" + s.key,
		"AX_JOB_ID=" + job, "AX_SLOW_JOB_ID=" + slow, "AX_NOTIFY_JOB_ID=" + notify, "AX_RECEIVER_URL=" + receiver.URL,
		"AX_CLASS=billing-db", "AX_DRAIN_AGENT=console-spare", "AX_SHOTS=" + shots, "AX_CHROMIUM=" + chromium,
	}, filepath.Join(dir, "console.mjs"))
	err = proc.Wait(4 * time.Minute)
	t.Logf("node console.mjs (screenshots in %s):\n%s", shots, proc.Output())
	require.NoError(t, err)
	shotFiles, err := filepath.Glob(filepath.Join(shots, "*.png"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(shotFiles), 15, "a screenshot of each page")
}

// consoleTestDir is tests/e2e/console in this checkout.
func consoleTestDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "console")
}

// consoleShots is where the screenshots go: AX_CONSOLE_SHOTS, else a new
// folder under the temp dir, kept as the test's artefacts when it fails
// and removed when it passes (every make test made one).
func consoleShots(t *testing.T) string {
	t.Helper()
	if dir := os.Getenv("AX_CONSOLE_SHOTS"); dir != "" {
		require.NoError(t, os.MkdirAll(dir, 0o755))
		return dir
	}
	dir, err := os.MkdirTemp("", "ax-console-shots-")
	require.NoError(t, err)
	t.Cleanup(func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	})
	return dir
}

// requireBrowser finds node, Chromium (AX_CHROMIUM, else chromium on
// PATH: Debian's package) and playwright-core (npm ci in
// tests/e2e/console; make test and .ci/run do it). Missing, the test is
// skipped on a developer's machine and fails in CI (CI set).
func requireBrowser(t *testing.T, dir string) (node, chromium string) {
	t.Helper()
	const install = "install Node.js 20 or later and Chromium (apt-get install chromium), then run npm ci in tests/e2e/console"
	var missing []string
	node, err := exec.LookPath("node")
	if err != nil {
		missing = append(missing, "node is not on PATH")
	}
	chromium = os.Getenv("AX_CHROMIUM")
	if chromium == "" {
		if chromium, err = exec.LookPath("chromium"); err != nil {
			missing = append(missing, "chromium is not on PATH")
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core", "package.json")); err != nil {
		missing = append(missing, "tests/e2e/console/node_modules is missing")
	}
	if len(missing) == 0 {
		return node, chromium
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s and CI is set: the web console must be tested in a browser in CI; %s", strings.Join(missing, ", "), install)
	}
	t.Skipf("SKIP: %s, so the web console is not tested in a browser; %s (with CI set this fails)", strings.Join(missing, ", "), install)
	return "", ""
}
