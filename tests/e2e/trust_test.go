package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// Issue #12, item 11, with real processes: which executors an ax-agent
// runs is its own decision (AX_EXECUTORS); shell is off unless enabled.

// TestAgentProcessesRunOnlyTheirExecutors: an ax-agent started without
// AX_EXECUTORS never leases a shell task (it waits, and psql shows why)
// until an agent with AX_EXECUTORS=shell takes it; an ax-agent without
// shell that the server hands a shell task anyway (its registration
// rewritten on the way to claim shell) refuses to run it.
func TestAgentProcessesRunOnlyTheirExecutors(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	pool := e2ekit.OpenPool(t, s.DBURL)
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")

	s.RunAgent(t, "plain", s.URL, "AX_EXECUTORS=", "AX_AGENT_LABELS=pool=plain") // the default: handler,http
	plainID := s.AgentReady(t, "plain")
	job := s.CreateJob(t, map[string]any{"name": "sh", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "touch " + ran}})
	exec := s.Trigger(t, job)

	// It waits: unassigned (one agent is too few to route to), it was
	// leasable at once, yet the plain agent has not taken it. The proof
	// that the plain agent has polled since: it leases and runs an HTTP
	// task triggered after the shell task, while the shell task stays
	// pending (the end of the test checks it never leased it).
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(target.Close)
	later := s.Trigger(t, s.CreateJob(t, map[string]any{"name": "later", "trigger": map[string]any{"kind": "manual"},
		"target":   map[string]any{"labels": map[string]string{"pool": "plain"}},
		"executor": map[string]any{"kind": "http", "url": target.URL}}))
	require.Equal(t, "succeeded", s.WaitExecution(t, later, 15*time.Second), "the plain agent polls and runs what it can")
	require.Equal(t, plainID, e2ekit.TasksOf(t, pool, later)[0].AgentID)
	tasks := e2ekit.TasksOf(t, pool, exec)
	require.Len(t, tasks, 1)
	require.Equal(t, "pending", tasks[0].State, "no agent without shell leases a shell task")
	require.NoFileExists(t, ran)
	require.Equal(t, []any{"handler", "http"}, s.AgentNamed(t, "plain")["executors"])
	var reason string
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT reason FROM ax.tasks_without_agent WHERE execution_id = $1", exec).Scan(&reason))
	require.Contains(t, reason, "accepts executor shell")

	s.RunAgent(t, "sheller", s.URL, "AX_EXECUTORS=shell")
	require.Equal(t, "succeeded", s.WaitExecution(t, exec, 15*time.Second))
	require.FileExists(t, ran)
	require.Equal(t, s.AgentReady(t, "sheller"), e2ekit.TasksOf(t, pool, exec)[0].AgentID)
	var plainEvents int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ax.all_task_events WHERE execution_id = $1 AND agent_id = $2`, exec, plainID).Scan(&plainEvents))
	require.Zero(t, plainEvents, "the plain agent never leased the shell task")

	// A server that hands a shell task to an agent without shell (here: it
	// was told the agent accepts shell) gets the task refused, not run.
	forged := filepath.Join(dir, "forged")
	proxy := newExecutorClaimProxy(t, s.URL)
	s.RunAgent(t, "liar", proxy, "AX_EXECUTORS=handler,http", "AX_AGENT_LABELS=pool=liar")
	s.AgentReady(t, "liar")
	job = s.CreateJob(t, map[string]any{"name": "forged", "trigger": map[string]any{"kind": "manual"},
		"target":   map[string]any{"labels": map[string]string{"pool": "liar"}},
		"executor": map[string]any{"kind": "shell", "command": "touch " + forged},
		"retry":    map[string]any{"max_attempts": 1}})
	exec = s.Trigger(t, job)
	require.Equal(t, "failed", s.WaitExecution(t, exec, 15*time.Second))
	require.NoFileExists(t, forged)
	require.Contains(t, e2ekit.TasksOf(t, pool, exec)[0].Error, `executor kind "shell" is not enabled on this agent`)
}

// newExecutorClaimProxy forwards to target, adding shell to the executors
// of every agent registration that passes: a server that believes the
// agent runs shell. It returns the proxy's URL.
func newExecutorClaimProxy(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/v1/agents/register") {
			var reg map[string]any
			if err := json.NewDecoder(r.Body).Decode(&reg); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			reg["executors"] = []string{"shell", "handler", "http"}
			body, _ := json.Marshal(reg)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // an agent's long poll must not hold Close up
		srv.Close()
	})
	return srv.URL
}

// TestKeyCommandLimits: `ax key create --groups` makes a key that sees
// only its groups' jobs, `--labels` an agent key whose agents keep to its
// labels, and `ax key revoke` of that key stops the agent's own token.
func TestKeyCommandLimits(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	key := func(args ...string) string {
		cmd := exec.Command(proctest.Binary(t, "ax"), append([]string{"key", "--server", s.URL, "--key", s.Key, "create"}, args...)...)
		cmd.Stderr = os.Stderr
		out, err := cmd.Output()
		require.NoError(t, err)
		return strings.TrimSpace(string(out))
	}
	billing := key("--scope", "submit", "--groups", "billing,invoices")
	reports := s.CreateJob(t, map[string]any{"name": "r", "group": "reports", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "handler", "handler": "r"}})
	status, _ := getAs(t, s.URL+"/v1/jobs/"+reports, billing)
	require.Equal(t, http.StatusNotFound, status)
	status, _ = e2ekit.PostAs(t, s.URL+"/v1/jobs", billing, map[string]any{"name": "i", "group": "invoices",
		"trigger": map[string]any{"kind": "manual"}, "executor": map[string]any{"kind": "handler", "handler": "i"}})
	require.Equal(t, http.StatusCreated, status)

	agentKey := key("--scope", "agent", "--labels", "pool=billing")
	status, body := e2ekit.PostAs(t, s.URL+"/v1/agents/register", agentKey, map[string]any{"name": "x", "capacity": 1,
		"labels": map[string]string{"pool": "payments"}})
	require.Equal(t, http.StatusForbidden, status, body)
	status, creds := e2ekit.PostAs(t, s.URL+"/v1/agents/register", agentKey, map[string]any{"name": "x", "capacity": 1,
		"labels": map[string]string{"pool": "billing"}})
	require.Equal(t, http.StatusCreated, status, creds)
	beat := s.URL + "/v1/agents/" + creds["agent_id"].(string) + "/heartbeat"
	status, _ = e2ekit.PostAs(t, beat, creds["token"].(string), map[string]any{"tasks": []any{}, "running": 0})
	require.Equal(t, http.StatusOK, status)

	out, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "list").Output()
	require.NoError(t, err)
	var keyID string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "labels pool=billing") {
			keyID = strings.Fields(line)[0]
		}
	}
	require.NotEmpty(t, keyID, "ax key list shows the binding: %s", out)
	require.NoError(t, exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "revoke", keyID).Run())
	require.Eventually(t, func() bool {
		status, _ := e2ekit.PostAs(t, beat, creds["token"].(string), map[string]any{"tasks": []any{}, "running": 0})
		return status == http.StatusUnauthorized
	}, time.Second, 20*time.Millisecond, "the agent's token dies with its key")
}

// getAs GETs url with token as the bearer.
func getAs(t *testing.T, url, token string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}
