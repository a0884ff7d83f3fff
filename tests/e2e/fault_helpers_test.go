package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/proctest"
)

// Helpers of the process-level fault tests (issue #4): servers with their
// own agent timing, agents behind a recording proxy, the database seen
// through psql-like queries, and cleanup of what killed agents leave.

// startServerOn runs `ax serve` on dbURL with extra environment (AX_LEASE,
// AX_HEARTBEAT_INTERVAL…).
func startServerOn(t *testing.T, dbURL string, env ...string) *server {
	t.Helper()
	key := "ax_e2e_bootstrap_admin_key_0123456789"
	proc := proctest.Start(t, proctest.Binary(t, "ax"),
		append([]string{"DATABASE_URL=" + dbURL, "AX_ADMIN_KEY=" + key, "AX_ADDR=127.0.0.1:0"}, env...), "serve")
	// Generous: a loaded machine running race-built processes once took
	// over 30 s to start a server that made a few hundred partitions.
	u := "http://" + proctest.WaitServing(t, proc, 90*time.Second)
	proctest.WaitHTTP(t, u+"/readyz", 90*time.Second)
	return &server{url: u, dbURL: dbURL, key: key, proc: proc}
}

// runAgent runs an ax-agent process named name that reaches the server at
// serverURL (s itself, or a proxy in front of it), with extra environment.
func (s *server) runAgent(t *testing.T, name, serverURL string, env ...string) *proctest.Process {
	t.Helper()
	out, err := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.url, "--key", s.key, "create", "--scope", "agent").Output()
	require.NoError(t, err)
	return proctest.Start(t, proctest.Binary(t, "ax-agent"), append([]string{
		"AX_SERVER=" + serverURL, "AX_AGENT_KEY=" + strings.TrimSpace(string(out)),
		"AX_AGENT_NAME=" + name, "AX_AGENT_CAPACITY=2",
		"AX_EXECUTORS=shell,http,handler", // these tests run shell jobs; env may say otherwise
	}, env...))
}

// agentReady waits until the agent called name is registered, active and
// ready, and returns its id.
func (s *server) agentReady(t *testing.T, name string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		a := s.agentNamed(t, name)
		if a == nil || a["state"] != "active" || a["ready"] != true {
			return false
		}
		id = a["id"].(string)
		return true
	}, 30*time.Second, 100*time.Millisecond, "agent %s ready", name)
	return id
}

// agentNamed returns the agent called name as GET /v1/agents shows it, or
// nil: the one not offline, else an offline one (listed only when asked
// for).
func (s *server) agentNamed(t *testing.T, name string) map[string]any {
	t.Helper()
	for _, query := range []string{"?limit=1000", "?limit=1000&state=offline"} {
		status, out := s.api(t, "GET", "/v1/agents"+query, nil)
		require.Equal(t, http.StatusOK, status, out)
		for _, a := range out["agents"].([]any) {
			if a := a.(map[string]any); a["name"] == name {
				return a
			}
		}
	}
	return nil
}

// createJob creates a job and returns its id.
func (s *server) createJob(t *testing.T, job map[string]any) string {
	t.Helper()
	status, out := s.api(t, "POST", "/v1/jobs", job)
	require.Equal(t, http.StatusCreated, status, out)
	return out["id"].(string)
}

// trigger fires a job by hand and returns the execution id.
func (s *server) trigger(t *testing.T, jobID string) string {
	t.Helper()
	status, out := s.api(t, "POST", "/v1/jobs/"+jobID+"/trigger", nil)
	require.Equal(t, http.StatusAccepted, status, out)
	return out["id"].(string)
}

// waitExecution waits up to timeout for an execution to end (a delayed
// run waiting for its time has not) and returns its final state.
func (s *server) waitExecution(t *testing.T, execID string, timeout time.Duration) string {
	t.Helper()
	var state string
	require.Eventually(t, func() bool {
		_, got := s.api(t, "GET", "/v1/executions/"+execID, nil)
		state, _ = got["state"].(string)
		return state != "" && state != "scheduled" && state != "pending" && state != "running"
	}, timeout, 100*time.Millisecond, "execution %s ends", execID)
	return state
}

// output is everything the tasks of an execution printed, as recorded.
func (s *server) output(t *testing.T, execID string) string {
	t.Helper()
	status, logs := s.api(t, "GET", "/v1/executions/"+execID+"/logs?kind=log", nil)
	require.Equal(t, http.StatusOK, status, logs)
	var b strings.Builder
	for _, e := range logs["events"].([]any) {
		b.WriteString(e.(map[string]any)["message"].(string))
	}
	return b.String()
}

// postAs POSTs body to the server with token as the bearer.
func postAs(t *testing.T, url, token string, body any) (int, map[string]any) {
	t.Helper()
	raw, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(raw))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// openPool connects to the test's database, as psql would, to check rows.
func openPool(t *testing.T, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// missAMinute makes the job's trigger look as after a minute-long outage:
// its next fire a minute in the past, and its last fired tick before it.
// (Moving only the next fire raced with the loop: a tick it had fired
// since the job was made was later than the missed one, which then
// counted as fired already and was not caught up.)
func missAMinute(t *testing.T, pool *pgxpool.Pool, jobID string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `UPDATE ax.trigger SET next_fire_at = now() - interval '60 seconds',
		last_scheduled_for = now() - interval '61 seconds' WHERE job_id = $1`, jobID)
	require.NoError(t, err)
}

// taskRow is one ax.task row, the columns a result changes.
type taskRow struct {
	ID, State, AgentID, LeaseToken, Result, Error string
	Attempt                                       int
	UpdatedAt                                     time.Time
}

// tasksOf returns the tasks of an execution by shard.
func tasksOf(t *testing.T, pool *pgxpool.Pool, execID string) []taskRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT id::text, state::text, coalesce(agent_id::text, ''), coalesce(lease_token::text, ''),
		       coalesce(result::text, ''), coalesce(error, ''), attempt, updated_at
		FROM ax.all_tasks WHERE execution_id = $1 ORDER BY shard_index`, execID)
	require.NoError(t, err)
	defer rows.Close()
	var out []taskRow
	for rows.Next() {
		var r taskRow
		require.NoError(t, rows.Scan(&r.ID, &r.State, &r.AgentID, &r.LeaseToken, &r.Result, &r.Error, &r.Attempt, &r.UpdatedAt))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// stateEvent is one state change of a task, from ax.all_task_events.
type stateEvent struct {
	State, AgentID, Message string
	Attempt                 int
	At                      time.Time
}

// stateEvents returns a task's state changes in order.
func stateEvents(t *testing.T, pool *pgxpool.Pool, taskID string) []stateEvent {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT state::text, coalesce(agent_id::text, ''), message, attempt, at
		FROM ax.all_task_events WHERE task_id = $1 AND kind = 'state' ORDER BY id`, taskID)
	require.NoError(t, err)
	defer rows.Close()
	var out []stateEvent
	for rows.Next() {
		var e stateEvent
		require.NoError(t, rows.Scan(&e.State, &e.AgentID, &e.Message, &e.Attempt, &e.At))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}

// results keeps the events that record a task's result: the final states.
func results(events []stateEvent) []stateEvent {
	var out []stateEvent
	for _, e := range events {
		switch e.State {
		case "succeeded", "failed", "cancelled", "timed_out":
			out = append(out, e)
		}
	}
	return out
}

// taskDir returns a folder for the marker files of tasks. A task's shell
// runs in a process group of its own, which an agent killed with SIGKILL
// leaves behind: commands write their group id to DIR/*.pid, and those
// groups are killed when the test ends, passed or failed.
func taskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return dir
}

// waitFile waits for a file a task writes.
func waitFile(t *testing.T, path string, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil },
		timeout, 50*time.Millisecond, "%s appears", path)
}

// agentProxy stands between one ax-agent and the server, on loopback, and
// records every call of the agent protocol with the answer. A test learns
// from it what the agent really sent (was a result reported?) and the
// agent's own token, which the server shows only once, at registration.
type agentProxy struct {
	url string

	mu    sync.Mutex
	calls []proxiedCall
}

// proxiedCall is one request through the proxy and the server's answer.
type proxiedCall struct {
	Path      string
	Status    int
	Req, Resp []byte
	At        time.Time
}

type proxiedCallKey struct{}

func newAgentProxy(t *testing.T, target string) *agentProxy {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	p := &agentProxy{}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.ErrorLog = log.New(io.Discard, "", 0) // calls cut short by a killed agent are expected
	rp.ModifyResponse = func(resp *http.Response) error {
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		call := resp.Request.Context().Value(proxiedCallKey{}).(*proxiedCall)
		call.Status, call.Resp, call.At = resp.StatusCode, body, time.Now()
		p.mu.Lock()
		p.calls = append(p.calls, *call)
		p.mu.Unlock()
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		call := &proxiedCall{Path: r.URL.Path, Req: body}
		rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), proxiedCallKey{}, call)))
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections() // a long poll of an agent still alive must not hold Close up
		srv.Close()
	})
	p.url = srv.URL
	return p
}

// callsTo returns the recorded calls whose path ends with suffix.
func (p *agentProxy) callsTo(suffix string) []proxiedCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []proxiedCall
	for _, c := range p.calls {
		if strings.HasSuffix(c.Path, suffix) {
			out = append(out, c)
		}
	}
	return out
}

// credentials returns the agent id and token of the agent's last
// registration.
func (p *agentProxy) credentials(t *testing.T) (agentID, token string) {
	t.Helper()
	regs := p.callsTo("/v1/agents/register")
	require.NotEmpty(t, regs, "the agent registered through the proxy")
	last := regs[len(regs)-1]
	require.Equal(t, http.StatusCreated, last.Status, string(last.Resp))
	var creds struct {
		AgentID string `json:"agent_id"`
		Token   string `json:"token"`
	}
	require.NoError(t, json.Unmarshal(last.Resp, &creds))
	return creds.AgentID, creds.Token
}
