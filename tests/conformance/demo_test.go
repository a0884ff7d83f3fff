package conformance

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/proctest"
)

// demoTasks is how many tasks the demo runs across two agents.
const demoTasks = 1000

// caseDemo, per SDK: 1,000 tasks of a handler sleeping 1–20 ms run
// across two agents of that SDK (real processes). One agent gets SIGTERM
// mid-way, with no drain grace: the tasks it holds are left unfinished
// (handed back, or lost with a lease whose answer the drain cut short)
// and finish on the other. Every task
// succeeds on its first attempt, and every handler ran to its end exactly
// once.
func caseDemo(t *testing.T, s *server, fx fixture, pool string) {
	// Grace 0: whatever runs at SIGTERM is handed back, so the test sees
	// tasks move; capacity 10 keeps a few running.
	env := []string{"AX_CAPACITY=10", "AX_DRAIN_GRACE_MS=0"}
	stopped := fx.start(t, s, pool+"-a", "pool="+pool, "", env...)
	stayed := fx.start(t, s, pool+"-b", "pool="+pool, "", env...)
	stoppedID, stayedID := s.agentID(t, pool+"-a"), s.agentID(t, pool+"-b")

	sleeps := make([]string, demoTasks)
	for i := range sleeps {
		sleeps[i] = strconv.Itoa(1 + rand.IntN(20))
	}
	began := time.Now()
	execID := s.runJob(t, pool, "sleep", nil, map[string]any{"shards": map[string]any{"count": demoTasks, "params": sleeps}})
	waitMidway(t, s, execID, stoppedID, demoTasks/3)
	stopped.Signal(syscall.SIGTERM)
	require.NoError(t, stopped.Wait(time.Minute), "the stopped agent drains and exits cleanly")
	require.Equal(t, "succeeded", s.waitExecution(t, execID, 3*time.Minute))
	t.Logf("%s: %d tasks in %s", fx.sdk, demoTasks, time.Since(began).Round(time.Millisecond))

	tasks := s.tasks(t, execID)
	require.Len(t, tasks, demoTasks)
	ranOn := map[string]int{}
	byID := map[string]task{}
	for _, tk := range tasks {
		require.Equal(t, "succeeded", tk.State, "task %s", tk.ID)
		require.Equal(t, 1, tk.Attempt, "task %s: handed back, not retried", tk.ID)
		ranOn[tk.AgentID]++
		byID[tk.ID] = tk
	}
	done := doneCounts(stopped, stayed)
	for _, tk := range tasks {
		require.Equal(t, 1, done[tk.ID], "task %s ran to its end once", tk.ID)
	}
	// Left unfinished: running ones stopped (CANCELLED) and handed back,
	// and those a lease call brought once the drain began, handed back
	// unstarted, or, when the drain cut that call short after the server
	// had leased them, lost with their lease and run again (same attempt).
	// On a loaded machine the handlers held at the signal (1–20 ms each) may
	// all have ended before the agent handles it: then nothing was left,
	// which is no fault (the drain case hands back tasks for certain).
	handedBack := leftBy(t, s, execID, stoppedID)
	if len(handedBack) == 0 {
		t.Logf("%s: the stopped agent had finished what it held when it handled SIGTERM", fx.sdk)
	}
	require.Subset(t, handedBack, linesWith(stopped, "CANCELLED "), "the stopped handlers' tasks were handed back")
	for _, id := range handedBack {
		require.Equal(t, stayedID, byID[id].AgentID, "task %s, left by the stopped agent, finished on the other", id)
	}
	t.Logf("%s: ran on the stopped agent %d, on the other %d; left unfinished by the stopped one %d",
		fx.sdk, ranOn[stoppedID], ranOn[stayedID], len(handedBack))
	require.Positive(t, ranOn[stoppedID])
	require.Equal(t, demoTasks, ranOn[stoppedID]+ranOn[stayedID])
}

// waitMidway waits until n tasks of the execution have succeeded and
// agentID holds at least half its 10 slots: the moment to stop it (with
// fewer, on a loaded machine they may all be done before it handles the
// signal).
func waitMidway(t testing.TB, s *server, execID, agentID string, n int) {
	t.Helper()
	require.Eventually(t, func() bool {
		var done, held int
		_ = s.pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE state = 'succeeded'),
			count(*) FILTER (WHERE state IN ('leased', 'running') AND agent_id = $2)
			FROM ax.all_tasks WHERE execution_id = $1`, execID, agentID).Scan(&done, &held)
		return done >= n && held >= 5
	}, 60*time.Second, time.Millisecond, "%d tasks succeed while the agent holds some", n)
}

// leftBy returns the ids of the execution's tasks that agentID left
// unfinished: handed back, or its lease lost (both make them pending
// again, recorded as a task event naming the agent).
func leftBy(t testing.TB, s *server, execID, agentID string) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT DISTINCT task_id::text FROM ax.task_event
		WHERE execution_id = $1 AND agent_id = $2 AND kind = 'state' AND state = 'pending'`, execID, agentID)
	require.NoError(t, err)
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(t, rows.Err())
	return ids
}

// doneCounts counts the DONE lines per task id the processes printed.
func doneCounts(procs ...*proctest.Process) map[string]int {
	out := map[string]int{}
	for _, p := range procs {
		for _, id := range linesWith(p, "DONE ") {
			out[id]++
		}
	}
	return out
}

// linesWith returns the task ids of p's output lines starting with prefix.
func linesWith(p *proctest.Process, prefix string) []string {
	var ids []string
	for _, line := range strings.Split(p.Output(), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			ids = append(ids, strings.Fields(rest)[0])
		}
	}
	return ids
}
