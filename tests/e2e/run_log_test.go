package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// logLines are the JSON log lines a process wrote.
func logLines(p *proctest.Process) []map[string]any {
	var lines []map[string]any
	sc := bufio.NewScanner(strings.NewReader(p.Output()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) == nil && l["msg"] != nil {
			lines = append(lines, l)
		}
	}
	return lines
}

// matching returns the lines at level with message msg whose attrs hold
// every pair of want.
func matching(lines []map[string]any, level, msg string, want map[string]any) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["level"] != level || l["msg"] != msg {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && l[k] == v
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

// waitLines polls p's log until cond holds for its lines.
func waitLines(t *testing.T, p *proctest.Process, what string, cond func([]map[string]any) bool) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if lines := logLines(p); cond(lines) {
			return lines
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s", what)
	return nil
}

// Logs show runs: at info a cron job firing every second and a manual run
// leave a line per fire and per end on the server, with the job's
// group/name, state, duration, error code and attempt, and one per task
// on the agent; a retried attempt is not logged as a completion; and an
// idle server with two agents writes no info line while they heartbeat
// (every second here, to measure over seconds instead of minutes).
func TestRunLogLines(t *testing.T) {
	t.Parallel()
	key := "ax_e2e_bootstrap_admin_key_0123456789"
	srv := proctest.Start(t, proctest.Binary(t, "ax"), []string{"DATABASE_URL=" + dbtest.NewURL(t), "AX_ADMIN_KEY=" + key,
		"AX_ADDR=127.0.0.1:0", "AX_LOG_FORMAT=json", "AX_LOG_LEVEL=debug", "AX_HEARTBEAT_INTERVAL=1s"}, "serve")
	url := "http://" + proctest.WaitServing(t, srv, 90*time.Second)
	proctest.WaitHTTP(t, url+"/readyz", 90*time.Second)
	s := &e2ekit.Server{URL: url, Key: key, Proc: srv}
	agentKey, err := exec.Command(proctest.Binary(t, "ax"), "key", "create", "--server", url, "--key", key, "--scope", "agent").Output()
	require.NoError(t, err)
	var agents []*proctest.Process
	for _, name := range []string{"idle-1", "idle-2"} {
		agents = append(agents, proctest.Start(t, proctest.Binary(t, "ax-agent"), []string{
			"AX_SERVER=" + url, "AX_AGENT_KEY=" + strings.TrimSpace(string(agentKey)), "AX_AGENT_NAME=" + name,
			"AX_EXECUTORS=shell", "AX_LOG_FORMAT=json"}))
	}

	// Idle: the clock is the agents' heartbeats (debug access lines).
	heartbeats := func(lines []map[string]any) int {
		n := 0
		for _, l := range matching(lines, "DEBUG", "http request", nil) {
			if p, _ := l["path"].(string); strings.HasSuffix(p, "/heartbeat") {
				n++
			}
		}
		return n
	}
	// Both agents, not two heartbeats of one: an agent registering after
	// the window began logged two info lines in it (CI, under load).
	beating := func(lines []map[string]any) int {
		paths := map[string]bool{}
		for _, l := range matching(lines, "DEBUG", "http request", nil) {
			if p, _ := l["path"].(string); strings.HasSuffix(p, "/heartbeat") {
				paths[p] = true
			}
		}
		return len(paths)
	}
	lines := waitLines(t, srv, "both agents heartbeating", func(l []map[string]any) bool { return beating(l) >= 2 })
	startBeats, startInfo, started := heartbeats(lines), len(levelLines(lines, "INFO")), time.Now()
	lines = waitLines(t, srv, "8 more heartbeats", func(l []map[string]any) bool { return heartbeats(l) >= startBeats+8 })
	// Partitions dropped are the first maintenance pass catching up once
	// (a database copied from a template made before midnight drops the
	// day's partitions it no longer needs), not idle chatter: at 00:22
	// UTC three such lines failed this test.
	var idleInfo []map[string]any
	for _, l := range levelLines(lines, "INFO")[startInfo:] {
		if msg, _ := l["msg"].(string); !strings.HasSuffix(msg, "partition dropped") {
			idleInfo = append(idleInfo, l)
		}
	}
	window := time.Since(started)
	perMinute := float64(len(idleInfo)) / window.Minutes()
	t.Logf("idle: %d info lines in %s with %d heartbeats (%.1f a minute)", len(idleInfo), window.Round(time.Millisecond),
		heartbeats(lines)-startBeats, perMinute)
	require.LessOrEqual(t, perMinute, 2.0, "idle info lines: %v", idleInfo)

	// A cron job every second for 5 s, a manual run, and a run whose first
	// attempt fails and is retried.
	status, cron := s.API(t, "POST", "/v1/jobs", map[string]any{"name": "tick", "group": "clock",
		"trigger":  map[string]any{"kind": "cron", "cron": "* * * * * *", "timezone": "UTC"},
		"executor": map[string]any{"kind": "shell", "command": "echo tick"}})
	require.Equal(t, http.StatusCreated, status, cron)
	cronID := cron["id"].(string)
	lines = waitLines(t, srv, "5 fires and 5 ends of the cron job", func(l []map[string]any) bool {
		return len(matching(l, "INFO", "run fired", map[string]any{"job_id": cronID})) >= 5 &&
			len(matching(l, "INFO", "run ended", map[string]any{"job": "clock/tick", "state": "succeeded"})) >= 5
	})
	status, _ = s.API(t, "POST", "/v1/jobs/"+cronID+"/pause", nil)
	require.Equal(t, http.StatusOK, status)
	ended := matching(lines, "INFO", "run ended", map[string]any{"job": "clock/tick", "state": "succeeded"})[0]
	require.NotEmpty(t, ended["execution_id"])
	require.Contains(t, ended, "duration_ms")
	require.Equal(t, float64(1), ended["attempt"])
	require.Equal(t, "schedule", ended["cause"])

	status, manual := s.API(t, "POST", "/v1/jobs", map[string]any{"name": "flaky", "group": "ops",
		"trigger":  map[string]any{"kind": "manual"},
		"retry":    map[string]any{"max_attempts": 2, "backoff_seconds": 1},
		"executor": map[string]any{"kind": "shell", "command": "exit 3"}})
	require.Equal(t, http.StatusCreated, status, manual)
	status, run := s.API(t, "POST", "/v1/jobs/"+manual["id"].(string)+"/trigger", map[string]any{})
	require.Equal(t, http.StatusAccepted, status, run)
	runID := run["id"].(string)
	lines = waitLines(t, srv, "the manual run's end", func(l []map[string]any) bool {
		return len(matching(l, "INFO", "run ended", map[string]any{"execution_id": runID})) == 1
	})
	end := matching(lines, "INFO", "run ended", map[string]any{"execution_id": runID})[0]
	require.Equal(t, "ops/flaky", end["job"])
	require.Equal(t, "failed", end["state"])
	require.Equal(t, "exit_3", end["error_code"])
	require.Equal(t, float64(2), end["attempt"])
	require.Equal(t, "manual", end["cause"])
	require.Len(t, matching(lines, "INFO", "task attempt failed: retrying", map[string]any{"execution_id": runID}), 1)
	for _, l := range lines {
		if l["msg"] == "task completed" {
			require.NotEqual(t, "pending", l["state"], "a retry is not a completion: %v", l)
		}
	}

	// The agents: one info line per task they ran, with its run.
	var agentLines []map[string]any
	for _, a := range agents {
		agentLines = append(agentLines, matching(logLines(a), "INFO", "task finished", nil)...)
	}
	byRun := map[any]int{}
	for _, l := range agentLines {
		byRun[l["execution_id"]]++
	}
	require.Equal(t, 2, byRun[runID], "two attempts of the manual run")
	require.Equal(t, "failed", func() any {
		for _, l := range agentLines {
			if l["execution_id"] == runID {
				return l["state"]
			}
		}
		return nil
	}())
	require.GreaterOrEqual(t, len(agentLines), 5+2)
}

// levelLines keeps the lines at level.
func levelLines(lines []map[string]any, level string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["level"] == level {
			out = append(out, l)
		}
	}
	return out
}
