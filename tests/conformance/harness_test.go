// Package conformance holds the one suite every ax agent implementation
// must pass — the Go agent (agent/), the TypeScript SDK (agent/ts) and the
// Python SDK (agent/python) — run against a real `ax serve`, each SDK
// driven through a small fixture program of its own (testdata/README.md
// says what every fixture does), started as a real process.
package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/proctest"
)

func TestMain(m *testing.M) {
	proctest.WidenParallel(8) // the cases mostly wait on processes
	code := dbtest.Run(m)
	proctest.Cleanup()
	for _, dir := range builtDirs {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// repoRoot is the checkout this file is in.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// server is an `ax serve` process on a database of its own, with the
// short lease and heartbeat interval the suite's timing relies on.
type server struct {
	url, dbURL, key string
	pool            *pgxpool.Pool
	proc            *proctest.Process
	// tb is the test or benchmark the server lives as long as.
	tb testing.TB
}

// bodyLimitProxy is a reverse proxy to target on loopback that refuses a
// request body over limit bytes as proxies do: 413 at once, the body left
// unread, the connection closed.
func bodyLimitProxy(t testing.TB, target string, limit int64) string {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			http.Error(w, "413 Request Entity Too Large", http.StatusRequestEntityTooLarge)
			return
		}
		forward.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// cutAnswerProxy is a reverse proxy to target on loopback that cuts off
// its first answer to a request whose path ends in suffix: the request
// reaches the server and is done, and the agent gets the status line, the
// headers and half the body before the connection closes (a proxy or
// load balancer dropping it). It reports on cut when it has cut.
func cutAnswerProxy(t testing.TB, target, suffix string) (addr string, cut <-chan struct{}) {
	t.Helper()
	u, err := url.Parse(target)
	require.NoError(t, err)
	forward := httputil.NewSingleHostReverseProxy(u)
	done := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first := false
		if strings.HasSuffix(r.URL.Path, suffix) {
			once.Do(func() { first = true })
		}
		if !first {
			forward.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		forward.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err) // httptest's HTTP/1.1 server always hijacks
		}
		defer conn.Close()
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
			rec.Code, http.StatusText(rec.Code), rec.Header().Get("Content-Type"), len(body))
		_, _ = buf.Write(body[:len(body)/2])
		_ = buf.Flush()
		close(done)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, done
}

// Lease is the suite's lease length and Heartbeat its heartbeat interval
// (whole seconds, as the server takes them): short, so that lost leases
// and long tasks show within seconds.
const (
	lease     = 6 * time.Second
	heartbeat = 2 * time.Second
)

func startServer(t testing.TB) *server {
	t.Helper()
	dbURL := dbtest.NewURL(t)
	key := "ax_conformance_admin_key_0123456789"
	proc := proctest.Start(t, proctest.Binary(t, "ax"), []string{"DATABASE_URL=" + dbURL, "AX_ADMIN_KEY=" + key,
		"AX_ADDR=127.0.0.1:0", "AX_LEASE=" + lease.String(), "AX_HEARTBEAT_INTERVAL=" + heartbeat.String()}, "serve")
	u := "http://" + proctest.WaitServing(t, proc, 90*time.Second)
	proctest.WaitHTTP(t, u+"/readyz", 90*time.Second)
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return &server{url: u, dbURL: dbURL, key: key, pool: pool, proc: proc, tb: t}
}

// newKey creates an API key (`ax key create`) and returns its secret.
func (s *server) newKey(t testing.TB, args ...string) string {
	t.Helper()
	cmd := exec.Command(proctest.Binary(t, "ax"), append([]string{"key", "create", "--server", s.url, "--key", s.key}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "ax key create: %s", stderr.String())
	return strings.TrimSpace(string(out))
}

// call sends body with token (the admin key when empty) and decodes the answer.
func (s *server) call(t testing.TB, method, path, token string, body any) (int, map[string]any) {
	t.Helper()
	var buf bytes.Buffer
	if body != nil {
		require.NoError(t, json.NewEncoder(&buf).Encode(body))
	}
	req, err := http.NewRequest(method, s.url+path, &buf)
	require.NoError(t, err)
	if token == "" {
		token = s.key
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// runJob creates a manual handler job targeting pool and triggers it;
// extra fields are merged into the job. It returns the execution id.
func (s *server) runJob(t testing.TB, pool, handler string, params map[string]any, extra map[string]any) string {
	t.Helper()
	job := map[string]any{
		"name": fmt.Sprintf("%s-%s-%d", pool, handler, time.Now().UnixNano()), "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "handler", "handler": handler},
		"target":   map[string]any{"labels": map[string]string{"pool": pool}},
		"retry":    map[string]any{"max_attempts": 1},
	}
	if params != nil {
		job["params"] = params
	}
	for k, v := range extra {
		job[k] = v
	}
	status, out := s.call(t, "POST", "/v1/jobs", "", job)
	require.Equal(t, http.StatusCreated, status, out)
	status, out = s.call(t, "POST", "/v1/jobs/"+out["id"].(string)+"/trigger", "", nil)
	require.Equal(t, http.StatusAccepted, status, out)
	return out["id"].(string)
}

// waitExecution waits for an execution to end and returns its state.
func (s *server) waitExecution(t testing.TB, execID string, timeout time.Duration) string {
	t.Helper()
	var state string
	require.Eventually(t, func() bool {
		_ = s.pool.QueryRow(context.Background(), `SELECT state::text FROM ax.all_executions WHERE id = $1`, execID).Scan(&state)
		return state != "" && state != "scheduled" && state != "pending" && state != "running"
	}, timeout, 20*time.Millisecond, "execution %s ends", execID)
	return state
}

// task is one task row, as the suite checks it.
type task struct {
	ID, State, AgentID, LeaseToken, Error, ErrorCode string
	Result                                           map[string]any
	ShardIndex, Attempt, LostLeases                  int
}

func (s *server) tasks(t testing.TB, execID string) []task {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `
		SELECT id::text, state::text, coalesce(agent_id::text, ''), coalesce(lease_token::text, ''), coalesce(error, ''),
		       coalesce(error_code, ''), result, shard_index, attempt, lost_leases
		FROM ax.all_tasks WHERE execution_id = $1 ORDER BY shard_index`, execID)
	require.NoError(t, err)
	defer rows.Close()
	var out []task
	for rows.Next() {
		var r task
		require.NoError(t, rows.Scan(&r.ID, &r.State, &r.AgentID, &r.LeaseToken, &r.Error, &r.ErrorCode, &r.Result,
			&r.ShardIndex, &r.Attempt, &r.LostLeases))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// waitTaskRunning waits until the execution's first task is held by an
// agent and returns it.
func (s *server) waitTaskRunning(t testing.TB, execID string) task {
	t.Helper()
	var got task
	require.Eventually(t, func() bool {
		ts := s.tasks(t, execID)
		if len(ts) == 0 {
			return false
		}
		got = ts[0]
		return got.State == "running" || got.State == "leased"
	}, time.Minute, 20*time.Millisecond, "a task of %s runs", execID)
	return got
}

// agentID waits until an agent called name is active and returns its id.
func (s *server) agentID(t testing.TB, name string) string {
	t.Helper()
	var id string
	require.Eventually(t, func() bool {
		return s.pool.QueryRow(context.Background(),
			`SELECT id::text FROM ax.agent WHERE name = $1 AND state = 'active'`, name).Scan(&id) == nil
	}, 60*time.Second, 20*time.Millisecond, "agent %s is active", name)
	return id
}

// agentIDNow is the id of the active agent called name, if there is one.
func (s *server) agentIDNow(name string) (string, error) {
	var id string
	err := s.pool.QueryRow(context.Background(),
		`SELECT id::text FROM ax.agent WHERE name = $1 AND state = 'active'`, name).Scan(&id)
	return id, err
}

// waitOutput waits until p printed a line containing all of parts.
func waitOutput(t testing.TB, p *proctest.Process, timeout time.Duration, parts ...string) string {
	t.Helper()
	var found string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(p.Output(), "\n") {
			all := true
			for _, part := range parts {
				all = all && strings.Contains(line, part)
			}
			if all {
				found = line
				return true
			}
		}
		return false
	}, timeout, 20*time.Millisecond, "a line with %q in the output", parts)
	return found
}

// builtDirs are temporary folders of compiled fixtures, removed by TestMain.
var (
	builtMu   sync.Mutex
	builtDirs []string
)

func tempBuildDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err == nil {
		builtMu.Lock()
		builtDirs = append(builtDirs, dir)
		builtMu.Unlock()
	}
	return dir, err
}
