package e2ekit

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// Server is an `ax serve` process on a database of its own.
type Server struct {
	URL, DBURL, Key string
	Proc            *proctest.Process
	// CAFile, when set, is the certificate the CLI must trust to reach a
	// server serving TLS with a self-signed one.
	CAFile string
}

// bootstrapAdminKey is the admin key every Server starts with
// (AX_ADMIN_KEY), its Key.
const bootstrapAdminKey = "ax_e2e_bootstrap_admin_key_0123456789"

// StartServer runs `ax serve` on a new database of its own.
func StartServer(t testing.TB) *Server {
	t.Helper()
	return StartServerOn(t, dbtest.NewURL(t))
}

// StartServerOn runs `ax serve` on dbURL with extra environment (AX_LEASE,
// AX_HEARTBEAT_INTERVAL…).
func StartServerOn(t testing.TB, dbURL string, env ...string) *Server {
	t.Helper()
	proc := proctest.Start(t, proctest.Binary(t, "ax"),
		append([]string{"DATABASE_URL=" + dbURL, "AX_ADMIN_KEY=" + bootstrapAdminKey, "AX_ADDR=127.0.0.1:0"}, env...), "serve")
	// Generous: a loaded machine running race-built processes once took
	// over 30 s to start a server that made a few hundred partitions.
	u := "http://" + proctest.WaitServing(t, proc, 90*time.Second)
	proctest.WaitHTTP(t, u+"/readyz", 90*time.Second)
	return &Server{URL: u, DBURL: dbURL, Key: bootstrapAdminKey, Proc: proc}
}

// AX runs the CLI against s and returns its stdout; a failed run's error
// is a *CLIError.
func (s *Server) AX(t testing.TB, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(proctest.Binary(t, "ax"), args...)
	cmd.Env = append(os.Environ(), "AX_SERVER="+s.URL, "AX_API_KEY="+s.Key, "DATABASE_URL="+s.DBURL)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), &CLIError{Err: err, Stderr: stderr.String()}
	}
	return string(out), nil
}

// CLIError is a failed run of the CLI: how it failed (an *exec.ExitError
// when it exited) and what it printed on stderr.
type CLIError struct {
	Err    error
	Stderr string
}

func (e *CLIError) Error() string { return e.Err.Error() + ": " + e.Stderr }

// API calls the server with the bootstrap admin key and decodes the answer.
func (s *Server) API(t testing.TB, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if body != nil {
		require.NoError(t, json.NewEncoder(&buf).Encode(body))
	}
	req, err := http.NewRequest(method, s.URL+path, &buf)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+s.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// RunAgent runs an ax-agent process named name that reaches the server at
// serverURL (s itself, or a proxy in front of it), with extra environment.
func (s *Server) RunAgent(t testing.TB, name, serverURL string, env ...string) *proctest.Process {
	t.Helper()
	out, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "create", "--scope", "agent").Output()
	require.NoError(t, err)
	return proctest.Start(t, proctest.Binary(t, "ax-agent"), append([]string{
		"AX_SERVER=" + serverURL, "AX_AGENT_KEY=" + strings.TrimSpace(string(out)),
		"AX_AGENT_NAME=" + name, "AX_AGENT_CAPACITY=2",
		"AX_EXECUTORS=shell,http,handler", // these tests run shell jobs; env may say otherwise
	}, env...))
}

// AgentReady waits until the agent called name is registered, active and
// ready, and returns its id.
func (s *Server) AgentReady(t testing.TB, name string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		a := s.AgentNamed(t, name)
		if a == nil || a["state"] != "active" || a["ready"] != true {
			return false
		}
		id = a["id"].(string)
		return true
	}, 30*time.Second, 100*time.Millisecond, "agent %s ready", name)
	return id
}

// AgentNamed returns the agent called name as GET /v1/agents shows it, or
// nil: the one not offline, else an offline one (listed only when asked
// for).
func (s *Server) AgentNamed(t testing.TB, name string) map[string]any {
	t.Helper()
	for _, query := range []string{"?limit=1000", "?limit=1000&state=offline"} {
		status, out := s.API(t, "GET", "/v1/agents"+query, nil)
		require.Equal(t, http.StatusOK, status, out)
		for _, a := range out["agents"].([]any) {
			if a := a.(map[string]any); a["name"] == name {
				return a
			}
		}
	}
	return nil
}

// CreateJob creates a job and returns its id.
func (s *Server) CreateJob(t testing.TB, job map[string]any) string {
	t.Helper()
	status, out := s.API(t, "POST", "/v1/jobs", job)
	require.Equal(t, http.StatusCreated, status, out)
	return out["id"].(string)
}

// Trigger fires a job by hand and returns the execution id.
func (s *Server) Trigger(t testing.TB, jobID string) string {
	t.Helper()
	return s.Fire(t, jobID, nil)
}

// Fire triggers a job with params and returns the execution id.
func (s *Server) Fire(t testing.TB, jobID string, params map[string]any) string {
	t.Helper()
	var body any
	if params != nil {
		body = map[string]any{"params": params}
	}
	status, out := s.API(t, "POST", "/v1/jobs/"+jobID+"/trigger", body)
	require.Equal(t, http.StatusAccepted, status, out)
	return out["id"].(string)
}

// WaitExecution waits up to timeout for an execution to end (a delayed
// run waiting for its time has not) and returns its final state.
func (s *Server) WaitExecution(t testing.TB, execID string, timeout time.Duration) string {
	t.Helper()
	var state string
	require.Eventually(t, func() bool {
		_, got := s.API(t, "GET", "/v1/executions/"+execID, nil)
		state, _ = got["state"].(string)
		return state != "" && state != "scheduled" && state != "pending" && state != "running"
	}, timeout, 100*time.Millisecond, "execution %s ends", execID)
	return state
}

// Output is everything the tasks of an execution printed, as recorded.
func (s *Server) Output(t testing.TB, execID string) string {
	t.Helper()
	status, logs := s.API(t, "GET", "/v1/executions/"+execID+"/logs?kind=log", nil)
	require.Equal(t, http.StatusOK, status, logs)
	var b strings.Builder
	for _, e := range logs["events"].([]any) {
		b.WriteString(e.(map[string]any)["message"].(string))
	}
	return b.String()
}
