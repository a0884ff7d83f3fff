package conformance

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// conformanceCase is one behaviour every agent must show, checked against
// a server shared by the SDK's cases; each case has its own pool label.
type conformanceCase struct {
	name string
	run  func(t *testing.T, s *server, fx fixture, pool string)
}

var cases = []conformanceCase{
	{"lease-and-run", caseLeaseAndRun},
	{"shards", caseShards},
	{"raising-handler", caseRaisingHandler},
	{"heartbeats", caseHeartbeats},
	{"cancellation", caseCancellation},
	{"fencing", caseFencing},
	{"drain", caseDrain},
	{"drain-reports-success", caseDrainReportsSuccess},
	{"declared-jobs", caseDeclaredJobs},
	{"label-bound-key", caseLabelBoundKey},
	{"demo-1000-tasks", caseDemo},
	{"large-results", caseLargeResults},
	{"large-logs", caseLargeLogs},
	{"proxy-body-limit", caseProxyBodyLimit},
	{"cut-answer", caseCutAnswer},
}

// TestConformance runs every case for every SDK on one `ax serve`, all in
// parallel, each case with a pool label and fixture processes of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for _, sdk := range sdks {
		t.Run(sdk.name, func(t *testing.T) {
			t.Parallel()
			fx := sdk.prepare(t)
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, s, fx, sdk.name+"-"+c.name)
				})
			}
		})
	}
}

// caseLeaseAndRun: a task leased by the agent runs its handler by name with
// the run's params, attempt, deadline and idempotency key; its output is
// shipped and its result recorded under the agent.
func caseLeaseAndRun(t *testing.T, s *server, fx fixture, pool string) {
	fx.start(t, s, pool, "pool="+pool, "")
	agentID := s.agentID(t, pool)
	params := map[string]any{"n": float64(42), "text": "héllo ✓"}
	before := time.Now().Add(-time.Minute)
	execID := s.runJob(t, pool, "echo", params, map[string]any{"timeout_seconds": 120})
	require.Equal(t, "succeeded", s.waitExecution(t, execID, time.Minute))
	tasks := s.tasks(t, execID)
	require.Len(t, tasks, 1)
	got := tasks[0]
	require.Equal(t, agentID, got.AgentID)
	require.Equal(t, params, got.Result["params"])
	require.Equal(t, float64(1), got.Result["attempt"])
	require.Equal(t, float64(1), got.Result["shard_total"])
	require.Equal(t, execID, got.Result["idempotency_key"], "one shard: the key is the execution id")
	require.Equal(t, execID, got.Result["execution_id"])
	deadline, err := time.Parse(time.RFC3339Nano, got.Result["deadline"].(string))
	require.NoError(t, err, "deadline %v", got.Result["deadline"])
	require.True(t, deadline.After(before.Add(2*time.Minute)) && deadline.Before(time.Now().Add(3*time.Minute)),
		"the deadline is the lease time plus the 120 s timeout: %s", deadline)
	status, logs := s.call(t, "GET", "/v1/executions/"+execID+"/logs?kind=log", "", nil)
	require.Equal(t, http.StatusOK, status, logs)
	var out strings.Builder
	for _, e := range logs["events"].([]any) {
		out.WriteString(e.(map[string]any)["message"].(string))
	}
	require.Contains(t, out.String(), "echo ", "the handler's log reached the server")
}

// caseShards: each shard's task gets its index, total, param and a key of
// its own.
func caseShards(t *testing.T, s *server, fx fixture, pool string) {
	fx.start(t, s, pool, "pool="+pool, "")
	shardParams := []string{"eu", "us", "ap"}
	execID := s.runJob(t, pool, "echo", map[string]any{"day": "mon"},
		map[string]any{"shards": map[string]any{"count": 3, "params": shardParams}})
	require.Equal(t, "succeeded", s.waitExecution(t, execID, time.Minute))
	tasks := s.tasks(t, execID)
	require.Len(t, tasks, 3)
	for i, task := range tasks {
		require.Equal(t, float64(i), task.Result["shard_index"])
		require.Equal(t, float64(3), task.Result["shard_total"])
		require.Equal(t, shardParams[i], task.Result["shard_param"])
		require.Equal(t, fmt.Sprintf("%s:%d", execID, i), task.Result["idempotency_key"])
		require.Equal(t, map[string]any{"day": "mon"}, task.Result["params"])
	}
}

// caseLargeResults: results that finish together and are more than one
// request may carry (the server takes 8 MiB a request) are all
// delivered, in requests the server takes: 48 shards on 48 slots each
// return 200 KiB, 9.6 MB in all.
func caseLargeResults(t *testing.T, s *server, fx fixture, pool string) {
	fx.start(t, s, pool, "pool="+pool, "", "AX_CAPACITY=48")
	agentID := s.agentID(t, pool)
	const size = 200 << 10
	execID := s.runJob(t, pool, "blob", map[string]any{"size": size},
		map[string]any{"shards": map[string]any{"count": 48}, "timeout_seconds": 120})
	require.Equal(t, "succeeded", s.waitExecution(t, execID, 90*time.Second))
	requireBlobs(t, s.tasks(t, execID), 48, size)
	requireNoneTooLarge(t, s, agentID, "complete")
}

// requireNoneTooLarge checks in the server's request log that none of the
// agent's calls to /v1/agents/{id}/<call> was refused as too large (413).
func requireNoneTooLarge(t *testing.T, s *server, agentID, call string) {
	t.Helper()
	for line := range strings.Lines(s.proc.Output()) {
		if strings.Contains(line, "/v1/agents/"+agentID+"/"+call) {
			require.NotContains(t, line, `"status":413`, "a batch too large for a request")
		}
	}
}

// requireBlobs checks that each of n tasks returned its blob whole on its
// first attempt.
func requireBlobs(t *testing.T, tasks []task, n, size int) {
	t.Helper()
	require.Len(t, tasks, n)
	for _, task := range tasks {
		require.Len(t, task.Result["blob"], size, "task %s", task.ID)
		require.Equal(t, 1, task.Attempt)
	}
}

// caseLargeLogs: output that piles up faster than it is shipped, more
// than one request may carry, all reaches the server, in requests it
// takes: 12 tasks at once each write 900 KB (under the server's 1 MiB a
// task) in pieces of 100 KB.
func caseLargeLogs(t *testing.T, s *server, fx fixture, pool string) {
	fx.start(t, s, pool, "pool="+pool, "", "AX_CAPACITY=12")
	agentID := s.agentID(t, pool)
	const size, count = 100_000, 9
	execID := s.runJob(t, pool, "print", map[string]any{"size": size, "count": count},
		map[string]any{"shards": map[string]any{"count": 12}, "timeout_seconds": 120})
	require.Equal(t, "succeeded", s.waitExecution(t, execID, 90*time.Second))
	rows, err := s.pool.Query(context.Background(), `
		SELECT t.shard_index, coalesce(sum(length(e.message)), 0)
		FROM ax.all_tasks t LEFT JOIN ax.task_event e ON e.execution_id = t.execution_id AND e.task_id = t.id AND e.kind = 'log'
		WHERE t.execution_id = $1 GROUP BY t.shard_index ORDER BY t.shard_index`, execID)
	require.NoError(t, err)
	stored := map[int]int{}
	for rows.Next() {
		var shard, n int
		require.NoError(t, rows.Scan(&shard, &n))
		stored[shard] = n
	}
	require.NoError(t, rows.Err())
	require.Len(t, stored, 12)
	for shard, n := range stored {
		require.Equal(t, size*count, n, "the output of shard %d", shard)
	}
	requireNoneTooLarge(t, s, agentID, "logs")
}

// caseProxyBodyLimit: behind a proxy that takes less a request than ax
// (1 MiB, nginx's default client_max_body_size), answering 413 and
// closing without reading the rest, results that finish together are
// still all delivered, in smaller calls: 24 shards of 100 KiB results,
// 2.4 MB in all, on 24 slots.
func caseProxyBodyLimit(t *testing.T, s *server, fx fixture, pool string) {
	proxy := bodyLimitProxy(t, s.url, 1<<20)
	fx.start(t, s, pool, "pool="+pool, "", "AX_CAPACITY=24", "AX_SERVER="+proxy)
	const size = 100 << 10
	execID := s.runJob(t, pool, "blob", map[string]any{"size": size},
		map[string]any{"shards": map[string]any{"count": 24}, "timeout_seconds": 120})
	require.Equal(t, "succeeded", s.waitExecution(t, execID, 90*time.Second))
	requireBlobs(t, s.tasks(t, execID), 24, size)
}

// caseCutAnswer: the answer to the agent's first report of results is cut
// off halfway (a proxy dropping the connection): the server recorded the
// result, and the agent cannot know. It takes the cut as a network
// error, like any other: it sends the results again (the server answers
// that their leases are no longer current) and goes on, so a run started
// after the cut succeeds too. An agent that took it for anything else
// stopped reporting results for good.
func caseCutAnswer(t *testing.T, s *server, fx fixture, pool string) {
	proxy, cut := cutAnswerProxy(t, s.url, "/complete")
	fx.start(t, s, pool, "pool="+pool, "", "AX_SERVER="+proxy)
	first := s.runJob(t, pool, "echo", nil, nil)
	require.Equal(t, "succeeded", s.waitExecution(t, first, time.Minute))
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("the first report of results was not cut")
	}
	second := s.runJob(t, pool, "echo", nil, nil)
	require.Equal(t, "succeeded", s.waitExecution(t, second, time.Minute), "results are reported after the cut")
}

// caseRaisingHandler: a handler that raises fails its task with the
// error's message and code.
func caseRaisingHandler(t *testing.T, s *server, fx fixture, pool string) {
	fx.start(t, s, pool, "pool="+pool, "")
	msg := "boom: the quota is spent"
	execID := s.runJob(t, pool, "fail", map[string]any{"message": msg, "code": "quota_exceeded"}, nil)
	require.Equal(t, "failed", s.waitExecution(t, execID, time.Minute))
	task := s.tasks(t, execID)[0]
	require.Equal(t, "failed", task.State)
	require.Contains(t, task.Error, msg)
	require.Equal(t, "quota_exceeded", task.ErrorCode)
}

// caseHeartbeats: a task three leases long keeps its lease by heartbeats:
// it succeeds on its first lease, never lost, and runs once.
func caseHeartbeats(t *testing.T, s *server, fx fixture, pool string) {
	p := fx.start(t, s, pool, "pool="+pool, "")
	ms := int(3 * lease / time.Millisecond)
	execID := s.runJob(t, pool, "sleep", map[string]any{"ms": ms}, nil)
	require.Equal(t, "succeeded", s.waitExecution(t, execID, time.Minute))
	task := s.tasks(t, execID)[0]
	require.Equal(t, 1, task.Attempt)
	require.Zero(t, task.LostLeases, "the lease was never lost")
	require.Equal(t, float64(ms), task.Result["slept_ms"])
	require.Equal(t, 1, strings.Count(p.Output(), "DONE "+task.ID), "the handler ran once")
}

// caseCancellation: cancelling the run reaches the running handler (its
// cancellation signal), and the task ends cancelled.
func caseCancellation(t *testing.T, s *server, fx fixture, pool string) {
	p := fx.start(t, s, pool, "pool="+pool, "")
	execID := s.runJob(t, pool, "sleep", map[string]any{"ms": 600000}, nil)
	task := s.waitTaskRunning(t, execID)
	waitOutput(t, p, time.Minute, "STARTED "+task.ID) // the handler runs: not a lease still on its way
	status, out := s.call(t, "POST", "/v1/executions/"+execID+"/cancel", "", nil)
	require.Less(t, status, 300, out)
	waitOutput(t, p, time.Minute, "CANCELLED "+task.ID)
	require.Equal(t, "cancelled", s.waitExecution(t, execID, time.Minute))
}

// caseFencing: the agent is stopped (SIGSTOP) past its lease, the task is
// leased again by another agent, and a result under the old lease token
// gets 409 and is not recorded. Resumed, the agent learns the lease is
// gone, stops the handler and reports nothing: the task's result is the
// other agent's.
func caseFencing(t *testing.T, s *server, fx fixture, pool string) {
	p := fx.start(t, s, pool, "pool="+pool, "", "AX_CAPACITY=1")
	s.agentID(t, pool)
	execID := s.runJob(t, pool, "sleep", map[string]any{"ms": 600000}, map[string]any{"retry": map[string]any{"max_attempts": 3}})
	held := s.waitTaskRunning(t, execID)
	waitOutput(t, p, time.Minute, "STARTED "+held.ID) // the handler runs: not a lease still on its way
	p.Signal(syscall.SIGSTOP)
	t.Cleanup(func() { p.Signal(syscall.SIGCONT) }) // so that it can be killed

	// Another agent, this test, takes the task once the lease is reaped.
	status, creds := s.call(t, "POST", "/v1/agents/register", s.newKey(t, "--scope", "agent"),
		map[string]any{"name": pool + "-other", "capacity": 1, "labels": map[string]string{"pool": pool}})
	require.Equal(t, http.StatusCreated, status, creds)
	other, token := creds["agent_id"].(string), creds["token"].(string)
	var lease map[string]any
	require.Eventually(t, func() bool {
		// Heard from, the test's agent stays active (silent for three
		// heartbeat intervals, it would go offline and lose its token).
		status, out := s.call(t, "POST", "/v1/agents/"+other+"/heartbeat", token,
			map[string]any{"tasks": []any{}, "running": 0, "ready": true})
		require.Equal(t, http.StatusOK, status, out)
		status, out = s.call(t, "POST", "/v1/agents/"+other+"/lease", token, map[string]any{"max": 1, "wait_seconds": 1})
		require.Equal(t, http.StatusOK, status, out)
		if ts, _ := out["tasks"].([]any); len(ts) == 1 {
			lease = ts[0].(map[string]any)
			return true
		}
		return false
	}, time.Minute, 10*time.Millisecond, "the stopped agent's lease runs out and the task is leased again")
	require.Equal(t, held.ID, lease["task_id"])
	require.NotEqual(t, held.LeaseToken, lease["lease_token"])

	stale := map[string]any{"results": []any{map[string]any{"task_id": held.ID, "lease_token": held.LeaseToken,
		"state": "succeeded", "result": map[string]any{"by": "stale"}}}}
	status, out := s.call(t, "POST", "/v1/agents/"+other+"/complete", token, stale)
	require.Equal(t, http.StatusConflict, status, "a result under the lost lease: %v", out)
	now := s.tasks(t, execID)[0]
	require.Contains(t, []string{"leased", "running"}, now.State, "nothing was recorded")
	require.Nil(t, now.Result)
	require.Equal(t, other, now.AgentID)

	p.Signal(syscall.SIGCONT)
	waitOutput(t, p, time.Minute, "CANCELLED "+held.ID)
	fresh := map[string]any{"results": []any{map[string]any{"task_id": held.ID, "lease_token": lease["lease_token"],
		"state": "succeeded", "result": map[string]any{"by": "other"}}}}
	status, out = s.call(t, "POST", "/v1/agents/"+other+"/complete", token, fresh)
	require.Equal(t, http.StatusOK, status, out)
	require.Equal(t, "succeeded", s.waitExecution(t, execID, time.Minute))
	task := s.tasks(t, execID)[0]
	require.Equal(t, map[string]any{"by": "other"}, task.Result)
	require.Equal(t, other, task.AgentID)
	require.NotContains(t, p.Output(), "DONE "+held.ID)
}

// caseDrain: SIGTERM drains: the task still running at the end of the
// grace is stopped and handed back at once (pending again, no attempt and
// no lost lease used up), and the agent exits cleanly.
func caseDrain(t *testing.T, s *server, fx fixture, pool string) {
	p := fx.start(t, s, pool, "pool="+pool, "", "AX_DRAIN_GRACE_MS=300")
	s.agentID(t, pool)
	execID := s.runJob(t, pool, "sleep", map[string]any{"ms": 600000}, nil)
	held := s.waitTaskRunning(t, execID)
	waitOutput(t, p, time.Minute, "STARTED "+held.ID) // the handler runs: not a lease still on its way
	p.Signal(syscall.SIGTERM)
	require.NoError(t, p.Wait(time.Minute), "the agent exits cleanly after draining")
	require.Contains(t, p.Output(), "CANCELLED "+held.ID, "the handler was told to stop")
	task := s.tasks(t, execID)[0]
	require.Equal(t, "pending", task.State, "handed back: pending again")
	require.Equal(t, 1, task.Attempt)
	require.Zero(t, task.LostLeases, "released, not lost: it did not wait for the lease to run out")
	var released int
	require.NoError(t, s.pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ax.task_event WHERE execution_id = $1 AND message = 'released by its agent'`, execID).Scan(&released))
	require.Equal(t, 1, released)
}

// caseDrainReportsSuccess: a handler that goes on after the drain told it
// to stop (grace 0) and ends with success did its work: its result is
// reported, not handed back for another agent to run again. (Handed
// back, it would wait here for an agent that never comes.)
func caseDrainReportsSuccess(t *testing.T, s *server, fx fixture, pool string) {
	p := fx.start(t, s, pool, "pool="+pool, "", "AX_DRAIN_GRACE_MS=0")
	agentID := s.agentID(t, pool)
	execID := s.runJob(t, pool, "stubborn", map[string]any{"ms": 1500}, nil)
	held := s.waitTaskRunning(t, execID)
	waitOutput(t, p, time.Minute, "STARTED "+held.ID)
	p.Signal(syscall.SIGTERM)
	require.NoError(t, p.Wait(time.Minute), "the agent exits cleanly after draining")
	require.Contains(t, p.Output(), "DONE "+held.ID)
	require.Equal(t, "succeeded", s.waitExecution(t, execID, 10*time.Second))
	task := s.tasks(t, execID)[0]
	require.Equal(t, agentID, task.AgentID)
	require.Equal(t, 1, task.Attempt)
}

// caseDeclaredJobs: jobs declared in code appear with the program's first
// version, a second version updates and prunes them, and the first
// version declared again is refused and changes nothing.
func caseDeclaredJobs(t *testing.T, s *server, fx fixture, pool string) {
	key := s.newKey(t, "--scope", "agent,submit")
	env := []string{"AX_JOB_GROUP=" + pool, "AX_JOB_SET=sdk:" + pool}
	declare := func(version string) {
		p := fx.start(t, s, pool+"-v"+version, "pool="+pool, key, append(env, "AX_DECLARE_VERSION="+version)...)
		require.Eventually(t, func() bool {
			return strings.Contains(p.Output(), "jobs declared") || strings.Contains(p.Output(), "jobs not declared")
		}, time.Minute, 20*time.Millisecond, "version %s is declared", version)
		p.Signal(syscall.SIGTERM)
		require.NoError(t, p.Wait(time.Minute))
	}
	type job struct {
		priority int
		paused   bool
		version  string
	}
	jobs := func() map[string]job {
		rows, err := s.pool.Query(context.Background(), `SELECT j.name, j.priority, tr.paused, coalesce(j.declared_version, '')
			FROM ax.job j JOIN ax.trigger tr ON tr.job_id = j.id WHERE j.group_name = $1 AND j.managed_by = $2`, pool, "sdk:"+pool)
		require.NoError(t, err)
		defer rows.Close()
		out := map[string]job{}
		for rows.Next() {
			var name string
			var j job
			require.NoError(t, rows.Scan(&name, &j.priority, &j.paused, &j.version))
			out[name] = j
		}
		require.NoError(t, rows.Err())
		return out
	}
	declare("1")
	require.Equal(t, map[string]job{"decl-a": {1, false, "1"}, "decl-b": {0, false, "1"}}, jobs())
	declare("2")
	require.Equal(t, map[string]job{"decl-a": {7, false, "2"}, "decl-b": {0, true, "1"}}, jobs(),
		"version 2 raised decl-a's priority and paused decl-b, which it leaves out")
	declare("1")
	require.Equal(t, map[string]job{"decl-a": {7, false, "2"}, "decl-b": {0, true, "1"}}, jobs(),
		"the older version was refused")
	var conflict string
	require.NoError(t, s.pool.QueryRow(context.Background(),
		`SELECT coalesce(conflict_version, '') FROM ax.declaration_set WHERE managed_by = $1`, "sdk:"+pool).Scan(&conflict))
	require.Equal(t, "1", conflict, "the set records the refused declaration")
}

// caseLabelBoundKey: an agent key bound to one pool cannot register an
// agent of another pool, and its agent leases only its own pool's tasks.
func caseLabelBoundKey(t *testing.T, s *server, fx fixture, pool string) {
	bound, other := pool+"-bound", pool+"-other"
	key := s.newKey(t, "--scope", "agent", "--labels", "pool="+bound)
	refused := fx.start(t, s, other, "pool="+other, key)
	require.Error(t, refused.Wait(2*time.Minute), "registering labels the key does not allow fails")
	require.False(t, refused.Running(), "the agent gave up")
	require.Contains(t, refused.Output(), "403")

	otherExec := s.runJob(t, other, "echo", nil, nil)
	fx.start(t, s, bound, "pool="+bound, key)
	boundExec := s.runJob(t, bound, "echo", nil, nil)
	require.Equal(t, "succeeded", s.waitExecution(t, boundExec, time.Minute))
	task := s.tasks(t, otherExec)[0]
	require.Equal(t, "pending", task.State, "the other pool's task is not leased by the bound agent")
	require.Empty(t, task.AgentID)
}
