package e2e

import (
	"context"
	"encoding/json"
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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
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

	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true",
		// Agents hear of a cancel at their next heartbeat; a callback that
		// fails twice is callback_failed at once.
		"AX_HEARTBEAT_INTERVAL=1s", "AX_LEASE=10s", "AX_CALLBACK_RETRY_SCHEDULE=100ms")
	s.RunAgent(t, "console-runner", s.URL)
	s.RunAgent(t, "console-spare", s.URL)
	s.AgentReady(t, "console-runner")
	s.AgentReady(t, "console-spare")
	readKey, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "create", "--scope", "read").Output()
	require.NoError(t, err)

	shell := func(cmd string) map[string]any { return map[string]any{"kind": "shell", "command": cmd} }
	job := s.CreateJob(t, map[string]any{"name": "report", "group": "billing", "owner": "team-billing",
		"trigger":  map[string]any{"kind": "cron", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
		"executor": shell(`for i in 1 2 3; do echo "report line $i"; sleep 2; done`)})
	slow := s.CreateJob(t, map[string]any{"name": "slow", "group": "ops", "trigger": map[string]any{"kind": "manual"},
		"executor": shell("echo started; sleep 120")})
	notify := s.CreateJob(t, map[string]any{"name": "notify", "group": "ops", "trigger": map[string]any{"kind": "manual"},
		"executor": shell("echo notified"), "callback": map[string]any{"url": receiver.URL + "/hook"}})
	status, out := s.API(t, "POST", "/v1/classes", map[string]any{"name": "billing-db", "rate": 10, "burst": 10})
	require.Equal(t, http.StatusCreated, status, out)
	backlog := s.CreateJob(t, map[string]any{"name": "backlog", "group": "ops", "trigger": map[string]any{"kind": "manual"},
		"executor": shell("true")})
	home := seedHome(t, e2ekit.OpenPool(t, s.DBURL), []string{job, slow, notify}, backlog)

	shots := consoleShots(t)
	proc := proctest.Start(t, node, []string{
		"AX_URL=" + s.URL, "AX_READ_KEY=" + strings.TrimSpace(string(readKey)), "AX_ADMIN_KEY=" + s.Key,
		"AX_JOB_ID=" + job, "AX_SLOW_JOB_ID=" + slow, "AX_NOTIFY_JOB_ID=" + notify, "AX_RECEIVER_URL=" + receiver.URL,
		"AX_CLASS=billing-db", "AX_DRAIN_AGENT=console-spare", "AX_SHOTS=" + shots, "AX_CHROMIUM=" + chromium,
		"AX_HOME_EXPECT=" + home,
	}, filepath.Join(dir, "console.mjs"))
	err = proc.Wait(4 * time.Minute)
	t.Logf("node console.mjs (screenshots in %s):\n%s", shots, proc.Output())
	require.NoError(t, err)
	shotFiles, err := filepath.Glob(filepath.Join(shots, "*.png"))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(shotFiles), 15, "a screenshot of each page")
}

// seedHome adds the last day's runs the home page draws, as the engine
// would have left them: 300 ended runs of the three jobs (ids UUIDv7 of
// their fire times, one run a minute, every 4 minutes back for 20 hours;
// 120 succeeded, 60 each failed, timed out and cancelled; 1 to 7 s
// long), and two pending runs of backlog whose six tasks wait until
// tomorrow (4 in class billing-db at priority 3, 2 in none at 9). It
// returns what the charts must show, as JSON for console.mjs.
func seedHome(t *testing.T, pool *pgxpool.Pool, jobs []string, backlog string) string {
	t.Helper()
	ctx := context.Background()
	now := time.Now().UTC()
	states := []string{"succeeded", "succeeded", "failed", "timed_out", "cancelled"}
	want := struct {
		States map[string]int            `json:"states"`
		Bars   int                       `json:"bars"`
		Hours  map[string]map[string]int `json:"hours"` // job id → finished hours → runs
		Queue  map[string]int            `json:"queue"` // "class/priority" → tasks
	}{States: map[string]int{}, Hours: map[string]map[string]int{}, Queue: map[string]int{"billing-db/3": 4, "/9": 2}}
	batch := &pgx.Batch{}
	for i := range 300 {
		job, state := jobs[i%len(jobs)], states[i%len(states)]
		fired := now.Add(-time.Duration(i*4+5) * time.Minute)
		took := time.Duration(i%7+1) * time.Second
		batch.Queue(`INSERT INTO ax.execution (id, job_id, cause, scheduled_for, fired_at, state, shard_count, priority,
			started_at, finished_at)
			VALUES ((lpad(to_hex(floor(extract(epoch FROM $2::timestamptz) * 1000)::bigint), 12, '0')
			        || substr(md5(random()::text), 13, 20))::uuid, $1, 'manual', $2, $2, $3::text::ax.execution_state, 1, 0, $2, $4)`,
			job, fired, state, fired.Add(took))
		want.States[state]++
		want.Bars++
		if want.Hours[job] == nil {
			want.Hours[job] = map[string]int{}
		}
		want.Hours[job][fired.Add(took).Truncate(time.Hour).Format(time.RFC3339)]++
	}
	for _, shards := range []struct {
		n, priority int
		class       string
	}{{4, 3, "billing-db"}, {2, 9, ""}} {
		batch.Queue(`WITH e AS (
			    INSERT INTO ax.execution (job_id, cause, scheduled_for, fired_at, shard_count, priority)
			    VALUES ($1, 'manual', $5, $5, $2, $3) RETURNING id, job_id
			)
			INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
			                     rate_class, not_before)
			SELECT e.id, e.job_id, i, $2, $3, 1, 60, nullif($4, ''), now() + interval '1 day' FROM e, generate_series(0, $2 - 1) i`,
			backlog, shards.n, shards.priority, shards.class, now.Add(-time.Minute).Truncate(time.Minute))
		want.States["pending"]++
	}
	want.Bars++ // the two pending runs fired in the same minute
	require.NoError(t, pool.SendBatch(ctx, batch).Close())
	out, err := json.Marshal(want)
	require.NoError(t, err)
	return string(out)
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
