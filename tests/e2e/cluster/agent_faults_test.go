package cluster

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// Process-level faults of agents (issue #4): real `ax serve` and ax-agent
// processes on loopback, real Postgres, signals sent to the agents' process
// groups, and the outcome read back from the database.

// shortLease makes a lost agent's tasks come back within seconds.
var shortLease = []string{"AX_LEASE=3s", "AX_HEARTBEAT_INTERVAL=1s"}

// TestAgentKilledMidTask: an agent SIGKILLed while its task runs loses the
// lease; the reaper, seeing the agent silent for a whole lease, hands the
// task to another agent at once on the same attempt: a job with the
// default retry policy keeps its 3 retries, and the loss shows as
// lost_leases. A late result under the killed agent's old lease token and
// its own key gets 409 and changes nothing; the task records exactly one
// result, the rescuer's.
func TestAgentKilledMidTask(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), shortLease...)
	pool := e2ekit.OpenPool(t, s.DBURL)
	dir := e2ekit.TaskDir(t)
	proxy := newAgentProxy(t, s.URL)
	victim := s.RunAgent(t, "victim", proxy.url)
	victimID := s.AgentReady(t, "victim")

	// The first run sleeps for a minute; the run after it finishes at
	// once. No retry policy: the defaults.
	jobID := s.CreateJob(t, map[string]any{
		"name":    "long",
		"trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": `echo "run attempt=$AX_ATTEMPT"
if mkdir ` + dir + `/$AX_TASK_ID.first 2>/dev/null; then echo $$ > ` + dir + `/$AX_TASK_ID.pid; exec sleep 60; fi
echo "run again"`},
	})
	execID := s.Trigger(t, jobID)
	var task e2ekit.TaskRow
	require.Eventually(t, func() bool {
		tasks := e2ekit.TasksOf(t, pool, execID)
		task = tasks[0]
		return task.AgentID == victimID && (task.State == "leased" || task.State == "running")
	}, 30*time.Second, 50*time.Millisecond, "the victim leases the task")
	e2ekit.WaitFile(t, filepath.Join(dir, task.ID+".pid"), 30*time.Second)
	// The victim ships output in batches; what it had not sent when killed
	// is lost, so wait for the first run's line before the kill.
	require.Eventually(t, func() bool { return strings.Contains(s.Output(t, execID), "run attempt=1") },
		30*time.Second, 50*time.Millisecond, "the first run's output reaches the server")
	oldToken := task.LeaseToken
	agentID, agentToken := proxy.credentials(t)
	require.Equal(t, victimID, agentID)

	s.RunAgent(t, "rescuer", s.URL)
	rescuerID := s.AgentReady(t, "rescuer")
	killed := time.Now()
	victim.Signal(syscall.SIGKILL)
	require.Error(t, victim.Wait(10*time.Second), "SIGKILLed")

	require.Equal(t, "succeeded", s.WaitExecution(t, execID, 30*time.Second))
	t.Logf("task run again and succeeded %s after the SIGKILL (lease 3 s)", time.Since(killed).Round(time.Millisecond))
	done := e2ekit.TasksOf(t, pool, execID)[0]
	require.Equal(t, "succeeded", done.State)
	require.Equal(t, rescuerID, done.AgentID, "the rescuer ran it")
	require.Equal(t, 1, done.Attempt, "the lease lost with its agent cost no attempt")
	_, exec := s.API(t, "GET", "/v1/executions/"+execID, nil)
	shard := exec["tasks"].([]any)[0].(map[string]any)
	require.EqualValues(t, 1, shard["attempt"])
	require.EqualValues(t, 4, shard["max_attempts"], "the default policy: 3 retries, all left")
	require.EqualValues(t, 1, shard["lost_leases"], "the loss is on record")

	// The killed agent's late result, with its own key and its old token.
	events := e2ekit.StateEvents(t, pool, task.ID)
	status, problem := e2ekit.PostAs(t, s.URL+"/v1/agents/"+victimID+"/complete", agentToken, map[string]any{
		"results": []map[string]any{{"task_id": task.ID, "lease_token": oldToken, "state": "failed",
			"result": map[string]any{"exit_code": 137}, "error": "late result of a dead agent"}},
	})
	// Offline, the dead agent lost its token too (issue #36): 401.
	require.Equal(t, http.StatusUnauthorized, status, problem)
	require.Equal(t, done, e2ekit.TasksOf(t, pool, execID)[0], "the stale result changed nothing")
	require.Equal(t, events, e2ekit.StateEvents(t, pool, task.ID), "the stale result recorded nothing")
	_, exec = s.API(t, "GET", "/v1/executions/"+execID, nil)
	require.Equal(t, "succeeded", exec["state"])

	// What happened, as task_event tells it: leased by the victim, reaped
	// when its lease was lost with it, leased by the rescuer, one result,
	// all on attempt 1.
	require.Len(t, results(events), 1, "exactly one result: %+v", events)
	require.Equal(t, e2ekit.StateEvent{State: "succeeded", AgentID: rescuerID, Attempt: 1, At: results(events)[0].At},
		results(events)[0])
	var states []string
	for _, e := range events {
		states = append(states, e.State+"/"+e.AgentID)
		require.Equal(t, 1, e.Attempt, "%+v", e)
		if e.State == "pending" {
			require.Equal(t, "lease lost: agent offline or silent: runs again at once on the same attempt (lost leases: 1 of 3)",
				e.Message)
		}
	}
	require.Equal(t, []string{"leased/" + victimID, "pending/" + victimID, "leased/" + rescuerID, "succeeded/" + rescuerID},
		states)
	out := s.Output(t, execID)
	require.Equal(t, 2, strings.Count(out, "run attempt=1"), out)
	require.Equal(t, 1, strings.Count(out, "run again"), out)
	require.NotContains(t, out, "run attempt=2", out)
}

// TestAgentStoppedPastLease: an agent SIGSTOPped past its lease (its task
// finishes meanwhile) learns on SIGCONT that the lease is gone and reports
// nothing; the task ends with the other agent's result, and the stopped
// agent recovers.
func TestAgentStoppedPastLease(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), shortLease...)
	pool := e2ekit.OpenPool(t, s.DBURL)
	dir := e2ekit.TaskDir(t)
	proxy := newAgentProxy(t, s.URL)
	sleeper := s.RunAgent(t, "sleeper", proxy.url)
	sleeperID := s.AgentReady(t, "sleeper")

	// The first run, in its own process group, lasts until the test has
	// stopped its agent (the file go), so it finishes while its agent is
	// stopped (a fixed 5 s was over before the stop on a loaded machine);
	// later runs finish at once.
	goOn := filepath.Join(dir, "go")
	jobID := s.CreateJob(t, map[string]any{
		"name":    "stopped",
		"trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": `if mkdir ` + dir + `/$AX_TASK_ID.first 2>/dev/null; then
echo "first run attempt=$AX_ATTEMPT"; echo $$ > ` + dir + `/$AX_TASK_ID.pid
while [ ! -e ` + goOn + ` ]; do sleep 0.05; done; echo first-run-done; touch ` + dir + `/$AX_TASK_ID.done
else echo "run again attempt=$AX_ATTEMPT"; fi`},
	})
	execID := s.Trigger(t, jobID)
	var taskID string
	require.Eventually(t, func() bool {
		task := e2ekit.TasksOf(t, pool, execID)[0]
		taskID = task.ID
		return task.AgentID == sleeperID && (task.State == "leased" || task.State == "running")
	}, 30*time.Second, 50*time.Millisecond, "the sleeper leases the task")
	e2ekit.WaitFile(t, filepath.Join(dir, taskID+".pid"), 30*time.Second)
	// Its first output is shipped while the lease holds.
	require.Eventually(t, func() bool { return strings.Contains(s.Output(t, execID), "first run attempt=1") },
		10*time.Second, 50*time.Millisecond)

	s.RunAgent(t, "other", s.URL)
	otherID := s.AgentReady(t, "other")
	sleeper.Signal(syscall.SIGSTOP)
	stopped := time.Now()
	t.Cleanup(func() { sleeper.Signal(syscall.SIGCONT) }) // so that it can be killed
	require.NoError(t, os.WriteFile(goOn, nil, 0o600))

	require.Equal(t, "succeeded", s.WaitExecution(t, execID, 60*time.Second))
	// The first run ends while its agent is still stopped.
	e2ekit.WaitFile(t, filepath.Join(dir, taskID+".done"), 30*time.Second)
	require.True(t, sleeper.Running())
	t.Logf("stopped for %s", time.Since(stopped).Round(time.Millisecond))
	resumed := time.Now()
	sleeper.Signal(syscall.SIGCONT)

	// The agent learns the lease is gone: from its own clock (the lease ran
	// out without renewal), from a heartbeat answer (lost), or from a 409.
	gone := []string{
		"lease expired without renewal: stopping the task",
		"lease expired before the result could be reported: result dropped",
		"lease lost before the result could be reported: result dropped",
		"lease lost: stopping the task",
		"server refused the result: the lease is no longer ours",
	}
	var learned string
	require.Eventually(t, func() bool {
		for _, line := range strings.Split(sleeper.Output(), "\n") {
			for _, msg := range gone {
				if strings.Contains(line, taskID) && strings.Contains(line, msg) {
					learned = msg
					return true
				}
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the resumed agent gives the task up")
	t.Logf("the resumed agent learned: %q", learned)
	// It is alive and heartbeats again: active once more.
	require.Eventually(t, func() bool {
		for _, c := range proxy.callsTo("/heartbeat") {
			if c.At.After(resumed) && c.Status == http.StatusOK {
				return true
			}
		}
		return false
	}, 30*time.Second, 50*time.Millisecond, "the resumed agent heartbeats")
	// Marked offline while stopped, it lost its token and registered
	// again: a registration named sleeper is active.
	require.Eventually(t, func() bool {
		var n int
		_ = pool.QueryRow(context.Background(),
			`SELECT count(*) FROM ax.agent WHERE name = 'sleeper' AND state = 'active'`).Scan(&n)
		return n == 1
	}, 30*time.Second, 100*time.Millisecond)
	require.True(t, sleeper.Running())

	// No result of the stopped agent was recorded: any it sent was refused.
	for _, c := range proxy.callsTo("/complete") {
		if strings.Contains(string(c.Req), taskID) {
			require.Contains(t, []int{http.StatusConflict, http.StatusUnauthorized}, c.Status,
				"a result under the lost lease (or the revoked token): %s → %s", c.Req, c.Resp)
		}
	}
	events := e2ekit.StateEvents(t, pool, taskID)
	require.Len(t, results(events), 1, "exactly one result: %+v", events)
	require.Equal(t, "succeeded", results(events)[0].State)
	require.Equal(t, otherID, results(events)[0].AgentID, "the result is the other agent's")
	for _, e := range events {
		if e.AgentID == sleeperID {
			require.Contains(t, []string{"leased", "pending"}, e.State, "the sleeper's events: %+v", events)
		}
	}
	task := e2ekit.TasksOf(t, pool, execID)[0]
	require.Equal(t, otherID, task.AgentID)
	// The stopped agent's lease was lost with it (silent for a whole
	// lease): the task ran again on the same attempt. The run again may
	// have gone to the stopped agent itself first: its long poll was
	// waiting on the server when it was stopped, and a server that checks
	// the agent's state only when the poll begins answers it even after the
	// reaper marked the agent offline. That lease was lost as well, the
	// other agent ran the task, and the stopped agent, resumed, ran it for
	// nothing: a heartbeat said the lease was lost, and a result it sent was
	// refused with 409 (checked above).
	require.Equal(t, 1, task.Attempt, "leases lost with their agent use up no attempt")
	for _, c := range proxy.callsTo("/lease") {
		if strings.Contains(string(c.Resp), taskID) && c.At.After(stopped) {
			t.Logf("the stopped agent was handed the task again by a long poll answered while it was stopped")
		}
	}
	out := s.Output(t, execID)
	require.NotContains(t, out, "first-run-done", "output printed after the lease was lost is not recorded")
	require.Equal(t, 1, strings.Count(out, "first run attempt=1"), "the first run's output, shipped while its lease held: %s", out)
	require.Equal(t, 1, strings.Count(out, "run again attempt=1"), "and the last run's: %s", out)
}

// TestAgentDrainLetsTasksFinish: SIGTERM drains an agent: the server hears
// it is draining (POST /v1/agents/{id}/drain) and routes new work
// elsewhere, while its running tasks finish within the grace, on their
// first lease, and the agent exits cleanly.
func TestAgentDrainLetsTasksFinish(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_LEASE=60s")
	pool := e2ekit.OpenPool(t, s.DBURL)
	dir := e2ekit.TaskDir(t)
	proxy := newAgentProxy(t, s.URL)
	draining := s.RunAgent(t, "draining", proxy.url) // default grace: 90 s
	drainingID := s.AgentReady(t, "draining")

	// Two shards that run until the test lets them finish.
	finish := filepath.Join(dir, "finish")
	jobID := s.CreateJob(t, map[string]any{
		"name":    "two-shards",
		"trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": `echo "started $AX_SHARD_INDEX"
while [ ! -e ` + finish + ` ]; do sleep 0.1; done; echo "finished $AX_SHARD_INDEX"`},
		"shards": map[string]any{"count": 2},
	})
	execID := s.Trigger(t, jobID)
	require.Eventually(t, func() bool {
		out := s.Output(t, execID)
		return strings.Contains(out, "started 0") && strings.Contains(out, "started 1")
	}, 30*time.Second, 50*time.Millisecond, "both shards run on the draining agent")
	for _, task := range e2ekit.TasksOf(t, pool, execID) {
		require.Equal(t, drainingID, task.AgentID)
	}
	s.RunAgent(t, "other", s.URL)
	otherID := s.AgentReady(t, "other")

	sigterm := time.Now()
	draining.Signal(syscall.SIGTERM)
	require.Eventually(t, func() bool { return s.AgentNamed(t, "draining")["state"] == "draining" },
		10*time.Second, 50*time.Millisecond, "the server hears the agent drains")
	// The agent said so itself, with its own token, once.
	require.Eventually(t, func() bool { return len(proxy.callsTo("/v1/agents/"+drainingID+"/drain")) > 0 },
		5*time.Second, 20*time.Millisecond)
	drains := proxy.callsTo("/v1/agents/" + drainingID + "/drain")
	require.Len(t, drains, 1)
	require.Equal(t, http.StatusNoContent, drains[0].Status, string(drains[0].Resp))

	// New work goes to the other agent while the draining one finishes.
	quick := s.CreateJob(t, map[string]any{
		"name":     "quick",
		"trigger":  map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "echo quick"},
	})
	quickExec := s.Trigger(t, quick)
	require.Equal(t, "succeeded", s.WaitExecution(t, quickExec, 30*time.Second))
	require.Equal(t, otherID, e2ekit.TasksOf(t, pool, quickExec)[0].AgentID)
	for _, task := range e2ekit.TasksOf(t, pool, execID) {
		require.Contains(t, []string{"leased", "running"}, task.State, "the drained tasks still run")
		require.Equal(t, drainingID, task.AgentID)
	}
	require.True(t, draining.Running(), "the agent waits for its tasks")

	require.NoError(t, os.WriteFile(finish, nil, 0o644))
	require.Equal(t, "succeeded", s.WaitExecution(t, execID, 30*time.Second))
	require.NoError(t, draining.Wait(30*time.Second), "the drained agent exits cleanly")
	t.Logf("drained in %s", time.Since(sigterm).Round(time.Millisecond))
	for _, task := range e2ekit.TasksOf(t, pool, execID) {
		require.Equal(t, drainingID, task.AgentID, "finished where it ran")
		require.Equal(t, 1, task.Attempt)
		var states []string
		for _, e := range e2ekit.StateEvents(t, pool, task.ID) {
			states = append(states, e.State)
		}
		require.Equal(t, []string{"leased", "succeeded"}, states, "never handed back nor reaped")
	}
	out := s.Output(t, execID)
	require.Contains(t, out, "finished 0")
	require.Contains(t, out, "finished 1")
	require.Eventually(t, func() bool { return s.AgentNamed(t, "draining")["state"] == "offline" },
		10*time.Second, 50*time.Millisecond, "the agent deregistered")
}

// TestAgentDrainHandsBackAtGraceEnd: with a short AX_DRAIN_GRACE, SIGTERM
// stops the running tasks when the grace ends and hands them back, so that
// another agent runs them at once, far sooner than the 60 s lease would
// expire, without using up an attempt.
func TestAgentDrainHandsBackAtGraceEnd(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_LEASE=60s")
	pool := e2ekit.OpenPool(t, s.DBURL)
	dir := e2ekit.TaskDir(t)
	draining := s.RunAgent(t, "draining", s.URL, "AX_DRAIN_GRACE=1s")
	drainingID := s.AgentReady(t, "draining")

	// The first run of each task sleeps for a minute; a run after it
	// (same attempt: a hand-back is not a failure) finishes at once.
	jobID := s.CreateJob(t, map[string]any{
		"name":    "handed-back",
		"trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": `if mkdir ` + dir + `/$AX_TASK_ID 2>/dev/null; then
echo $$ > ` + dir + `/$AX_TASK_ID.pid; echo "first run $AX_SHARD_INDEX"; exec sleep 60; fi
echo "run again $AX_SHARD_INDEX attempt=$AX_ATTEMPT"`},
		"shards": map[string]any{"count": 2},
	})
	execID := s.Trigger(t, jobID)
	var tasks []e2ekit.TaskRow
	require.Eventually(t, func() bool {
		tasks = e2ekit.TasksOf(t, pool, execID)
		for _, task := range tasks {
			if _, err := os.Stat(filepath.Join(dir, task.ID+".pid")); err != nil || task.AgentID != drainingID {
				return false
			}
		}
		return true
	}, 30*time.Second, 50*time.Millisecond, "both shards run on the draining agent")
	s.RunAgent(t, "other", s.URL)
	otherID := s.AgentReady(t, "other")

	sigterm := time.Now()
	draining.Signal(syscall.SIGTERM)
	require.Equal(t, "succeeded", s.WaitExecution(t, execID, 30*time.Second))
	rerun := time.Since(sigterm)
	t.Logf("handed back and run again %s after SIGTERM (grace 1 s, lease 60 s)", rerun.Round(time.Millisecond))
	require.Less(t, rerun, 15*time.Second, "no task waited for its lease to expire")
	require.NoError(t, draining.Wait(30*time.Second), "the drained agent exits cleanly")

	for _, task := range e2ekit.TasksOf(t, pool, execID) {
		require.Equal(t, otherID, task.AgentID)
		require.Equal(t, 1, task.Attempt, "a hand-back uses up no attempt")
		events := e2ekit.StateEvents(t, pool, task.ID)
		var states []string
		for _, e := range events {
			states = append(states, e.State+"/"+e.AgentID)
		}
		require.Equal(t, []string{"leased/" + drainingID, "pending/" + drainingID, "leased/" + otherID, "succeeded/" + otherID},
			states)
		require.Equal(t, "released by its agent", events[1].Message, "handed back, not reaped")
		require.Less(t, events[1].At.Sub(sigterm), 10*time.Second, "handed back once the grace ended")
	}
	out := s.Output(t, execID)
	require.Contains(t, out, "run again 0 attempt=1")
	require.Contains(t, out, "run again 1 attempt=1")
}
