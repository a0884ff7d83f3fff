package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// Process-level routing (issue #5): real `ax serve` and ax-agent processes
// on loopback and real Postgres. Where each run went is read back from its
// task events (GET /v1/executions/{id}/logs?kind=state: which agent leased
// it, and whether it was "routed here", "unassigned" or "taken over from
// agent …"), from GET /v1/agents, and from the routing decision recorded
// on ax.task.

// TestConsistentHashKeyStaysOnOneAgent: 100 runs of one customer's key over
// 3 agents all run on the agent that owns the key. SIGKILL that agent: the
// runs routed to it meanwhile are taken over by the key's runner-up after
// the steal delay, and once the server knows the agent is gone the key is
// routed to the runner-up directly; every run after the kill runs there,
// none on the third agent.
func TestConsistentHashKeyStaysOnOneAgent(t *testing.T) {
	t.Parallel()
	s := routedServer(t, dbtest.NewURL(t), "3s")
	pool := e2ekit.OpenPool(t, s.DBURL)
	procs := map[string]*proctest.Process{}
	for _, name := range []string{"k1", "k2", "k3"} {
		procs[name] = s.RunAgent(t, name, s.URL, "AX_AGENT_CAPACITY=10")
	}
	names := map[string]string{} // agent id → name
	for name := range procs {
		names[s.AgentReady(t, name)] = name
	}
	jobID := s.CreateJob(t, map[string]any{
		"name": "per-customer", "trigger": e2ekit.Manual, "executor": e2ekit.Shell("echo customer run"),
		"route": map[string]any{"strategy": "consistent_hash", "key": "customer_id={{.params.customer_id}}"},
	})
	customer := map[string]any{"customer_id": 9527}

	began := time.Now()
	var before []string
	for range 10 { // 10 at a time, so that none waits past the steal delay
		before = append(before, fireAndWait(t, s, jobID, 10, customer)...)
	}
	t.Logf("100 runs in %s", time.Since(began).Round(time.Millisecond))
	routes := routesOf(t, pool, before)
	owner, runnerUp := routes[0].Preferred, routes[0].Fallback
	require.Contains(t, names, owner)
	require.Contains(t, names, runnerUp)
	require.NotEqual(t, owner, runnerUp)
	for _, r := range routes {
		require.Equal(t, route{Preferred: owner, Fallback: runnerUp, Key: "customer_id=9527"}, r)
	}
	for _, id := range before {
		require.Equal(t, lease{By: owner, How: "routed here", ResultBy: owner, Result: "succeeded"}, leaseOf(t, s, id))
	}
	for id, name := range names {
		want := 0
		if id == owner {
			want = 100
		}
		require.Equal(t, want, served(s.AgentNamed(t, name)), "tasks %s leased", name)
	}

	// The owner dies. Runs go on at 4 a second until the server has marked
	// it offline and the router has seen that.
	killed := time.Now()
	procs[names[owner]].Signal(syscall.SIGKILL)
	require.Error(t, procs[names[owner]].Wait(10*time.Second), "SIGKILLed")
	var after []string
	var offline time.Time
	for offline.IsZero() || time.Since(offline) < routerRefresh {
		require.Less(t, time.Since(killed), 30*time.Second, "the killed agent goes offline")
		after = append(after, s.Fire(t, jobID, customer))
		if offline.IsZero() && s.AgentNamed(t, names[owner])["state"] == "offline" {
			offline = time.Now()
			t.Logf("%s offline %s after the SIGKILL", names[owner], offline.Sub(killed).Round(time.Millisecond))
		}
		time.Sleep(250 * time.Millisecond)
	}
	for _, id := range after {
		require.Equal(t, "succeeded", s.WaitExecution(t, id, 30*time.Second))
	}
	var settled []string
	for range 2 {
		settled = append(settled, fireAndWait(t, s, jobID, 10, customer)...)
	}

	first := leaseOf(t, s, after[0])
	require.Equal(t, lease{By: runnerUp, How: "taken over from agent " + owner, ResultBy: runnerUp, Result: "succeeded"}, first,
		"a run routed to the dead owner is taken over by the key's runner-up")
	ran := ranOn(t, s, append(append([]string{}, after...), settled...))
	require.Equal(t, map[string]int{runnerUp: len(after) + len(settled)}, ran,
		"after the kill the key runs on one agent, the runner-up")
	for i, r := range routesOf(t, pool, settled) {
		require.Equal(t, runnerUp, r.Preferred, "the key is now routed to the runner-up")
		require.Equal(t, "routed here", leaseOf(t, s, settled[i]).How)
	}
	t.Logf("after the SIGKILL: %d runs, all on %s (the runner-up); %s from the kill to the last",
		len(after)+len(settled), names[runnerUp], time.Since(killed).Round(time.Millisecond))
}

// TestLeastActiveAvoidsBusyAgent: with one agent busy with long tasks and
// another idle, least_active routes every new short task to the idle one,
// although the busy one has free slots and keeps asking for work.
func TestLeastActiveAvoidsBusyAgent(t *testing.T) {
	t.Parallel()
	s := routedServer(t, dbtest.NewURL(t), "30s")
	pool := e2ekit.OpenPool(t, s.DBURL)
	dir := e2ekit.TaskDir(t)
	s.RunAgent(t, "busy", s.URL, "AX_AGENT_CAPACITY=4")
	busyID := s.AgentReady(t, "busy")
	finish := filepath.Join(dir, "finish")
	long := s.CreateJob(t, map[string]any{
		"name": "long", "trigger": e2ekit.Manual, "shards": map[string]any{"count": 3},
		"executor": e2ekit.Shell(`echo $$ > ` + dir + `/$AX_TASK_ID.pid; while [ ! -e ` + finish + ` ]; do sleep 0.2; done`),
	})
	longExec := s.Trigger(t, long)
	require.Eventually(t, func() bool {
		a := s.AgentNamed(t, "busy")
		return a["running"] == float64(3)
	}, 30*time.Second, 100*time.Millisecond, "the busy agent runs the 3 long tasks")

	s.RunAgent(t, "idle", s.URL, "AX_AGENT_CAPACITY=4")
	idleID := s.AgentReady(t, "idle")
	time.Sleep(routerRefresh)
	short := s.CreateJob(t, map[string]any{
		"name": "short", "trigger": e2ekit.Manual, "executor": e2ekit.Shell("echo short"),
		"route": map[string]any{"strategy": "least_active"},
	})
	var shorts []string
	// 2 at a time: the idle agent never looks as busy as the busy one (3).
	// With 3 at a time, a router refresh while 3 shorts ran saw a tie,
	// and a short went to the busy agent.
	for range 6 {
		shorts = append(shorts, fireAndWait(t, s, short, 2, nil)...)
	}
	for i, id := range shorts {
		require.Equal(t, lease{By: idleID, How: "routed here", ResultBy: idleID, Result: "succeeded"}, leaseOf(t, s, id),
			"short run %d", i)
	}
	for _, r := range routesOf(t, pool, shorts) {
		require.Equal(t, idleID, r.Preferred)
	}
	busy := s.AgentNamed(t, "busy")
	require.Equal(t, busyID, busy["id"])
	require.Equal(t, 3, served(busy), "the busy agent leased only its long tasks")
	require.Equal(t, float64(3), busy["running"])
	require.Equal(t, len(shorts), served(s.AgentNamed(t, "idle")))

	require.NoError(t, os.WriteFile(finish, nil, 0o644))
	require.Equal(t, "succeeded", s.WaitExecution(t, longExec, 30*time.Second))
}

// TestFailingAgentQuarantinedThenRestored: an agent whose tasks fail 80%
// of the time (its tools are broken: a file only its process is told
// about exists) is quarantined; while quarantined it gets at most one
// probe task per AX_PROBE_EVERY and stays quarantined while the probes
// fail; once fixed (the file removed) its probes succeed, it is restored,
// and routed work comes back to it.
func TestFailingAgentQuarantinedThenRestored(t *testing.T) {
	t.Parallel()
	s := routedServer(t, dbtest.NewURL(t), "1s", "AX_PROBE_EVERY=1s", "AX_HEALTH_CHECK_EVERY=1s")
	broken := filepath.Join(t.TempDir(), "tools-broken")
	require.NoError(t, os.WriteFile(broken, nil, 0o644))
	s.RunAgent(t, "flaky", s.URL, "BROKEN_TOOLS="+broken)
	s.RunAgent(t, "steady", s.URL, "AX_AGENT_CAPACITY=1")
	flakyID := s.AgentReady(t, "flaky")
	steadyID := s.AgentReady(t, "steady")
	// On the flaky agent while the file exists, runs 1-4 of every 5 fail.
	jobID := s.CreateJob(t, map[string]any{
		"name": "work", "trigger": e2ekit.Manual, "route": map[string]any{"strategy": "round_robin"},
		"executor": e2ekit.Shell(`if [ -n "$BROKEN_TOOLS" ] && [ -e "$BROKEN_TOOLS" ]; then
  echo run >> "$BROKEN_TOOLS.runs"; n=$(wc -l < "$BROKEN_TOOLS.runs")
  if [ $((n % 5)) -ne 0 ]; then echo "tools broken (run $n)" >&2; exit 1; fi
fi
sleep 0.3; echo done`),
		"retry": map[string]any{"max_attempts": 1}, // each run one outcome
	})

	// Round robin: one run of each pair is the flaky agent's.
	var failedOnFlaky, ranOnFlaky int
	for round := 0; s.AgentNamed(t, "flaky")["state"] != "quarantined"; round++ {
		require.Less(t, round, 15, "the flaky agent is quarantined")
		ids, states := fireAndSettle(t, s, jobID, 2, nil)
		for i, id := range ids {
			l := leaseOf(t, s, id)
			require.Equal(t, states[i], l.Result)
			if l.ResultBy == flakyID {
				ranOnFlaky++
				if l.Result == "failed" {
					failedOnFlaky++
				}
			} else {
				require.Equal(t, "succeeded", l.Result, "the steady agent never fails")
			}
		}
	}
	quarantined := time.Now()
	flaky := s.AgentNamed(t, "flaky")
	t.Logf("quarantined after %d of its runs failed out of %d; recent record %v", failedOnFlaky, ranOnFlaky, flaky["recent"])
	require.NotEmpty(t, flaky["quarantined_at"])
	require.GreaterOrEqual(t, ranOnFlaky, 5, "at least 5 outcomes before a quarantine")
	require.GreaterOrEqual(t, float64(failedOnFlaky)/float64(ranOnFlaky), 0.5)
	require.LessOrEqual(t, flaky["recent"].(map[string]any)["success_rate"], 0.5)
	require.Equal(t, "active", s.AgentNamed(t, "steady")["state"])

	// Still broken: bursts of 6 runs of 0.3 s, a backlog that outlasts
	// AX_PROBE_EVERY on the steady agent's one slot, so that a probe finds
	// work: LeaseBroker.leaseOnce uses up a probe turn before it knows a
	// task is there, so a probe lost to a faster agent waits a whole
	// AX_PROBE_EVERY. The flaky agent gets a probe a second at most, and
	// stays quarantined.
	time.Sleep(routerRefresh) // runs fired before the router saw the quarantine may still be routed to it
	var probes int
	for time.Since(quarantined) < 5*time.Second {
		ids, _ := fireAndSettle(t, s, jobID, 6, nil)
		for _, id := range ids {
			if l := leaseOf(t, s, id); l.By == flakyID {
				probes++
				require.NotEqual(t, "routed here", l.How, "no work is routed to a quarantined agent")
			}
		}
		require.Equal(t, "quarantined", s.AgentNamed(t, "flaky")["state"], "failing probes keep it quarantined")
	}
	require.Positive(t, probes, "a quarantined agent is probed")
	require.LessOrEqual(t, probes, int(time.Since(quarantined)/time.Second)+1, "one probe per AX_PROBE_EVERY")
	t.Logf("%d probes in %s while broken", probes, time.Since(quarantined).Round(time.Millisecond))

	// Fixed: its probes succeed and it is restored.
	require.NoError(t, os.Remove(broken))
	fixed := time.Now()
	for s.AgentNamed(t, "flaky")["state"] != "active" {
		require.Less(t, time.Since(fixed), 30*time.Second, "the fixed agent is restored")
		fireAndWait(t, s, jobID, 6, nil)
	}
	restored := s.AgentNamed(t, "flaky")
	require.Nil(t, restored["quarantined_at"])
	t.Logf("restored %s after the fix", time.Since(fixed).Round(time.Millisecond))

	// Routed work comes back to it.
	time.Sleep(routerRefresh)
	back := fireAndWait(t, s, jobID, 6, nil)
	routedToFlaky := 0
	for _, id := range back {
		if l := leaseOf(t, s, id); l.By == flakyID && l.How == "routed here" {
			routedToFlaky++
		}
	}
	require.Positive(t, routedToFlaky, "a restored agent gets routed work again")
	ran := ranOn(t, s, back)
	require.Equal(t, len(back), ran[flakyID]+ran[steadyID])
}

// TestNotReadyAgentGetsNoTasks: an agent whose AX_READY_COMMAND fails
// registers and heartbeats but reports itself not ready: it gets no task
// while a ready agent runs all the work. Once its check passes it reports
// ready and gets its share of routed work.
func TestNotReadyAgentGetsNoTasks(t *testing.T) {
	t.Parallel()
	s := routedServer(t, dbtest.NewURL(t), "2s")
	pool := e2ekit.OpenPool(t, s.DBURL)
	installed := filepath.Join(t.TempDir(), "tools-installed")
	unready := s.RunAgent(t, "unready", s.URL, "AX_READY_COMMAND=test -e "+installed, "AX_READY_RETRY=300ms")
	s.RunAgent(t, "ready", s.URL)
	readyID := s.AgentReady(t, "ready")
	var unreadyID string
	require.Eventually(t, func() bool {
		a := s.AgentNamed(t, "unready")
		if a == nil || a["state"] != "active" || a["ready"] != false {
			return false
		}
		unreadyID = a["id"].(string)
		return strings.Contains(unready.Output(), "self-check failed: agent not ready")
	}, 30*time.Second, 100*time.Millisecond, "the unready agent is registered, alive and not ready")
	jobID := s.CreateJob(t, map[string]any{
		"name": "work", "trigger": e2ekit.Manual, "executor": e2ekit.Shell("echo work"),
		"route": map[string]any{"strategy": "round_robin"},
	})

	var early []string
	for range 3 {
		early = append(early, fireAndWait(t, s, jobID, 4, nil)...)
	}
	require.Equal(t, map[string]int{readyID: len(early)}, ranOn(t, s, early), "the ready agent runs everything")
	a := s.AgentNamed(t, "unready")
	require.Equal(t, false, a["ready"])
	require.Equal(t, 0, served(a))
	var events int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM ax.all_task_events WHERE agent_id = $1`, unreadyID).Scan(&events))
	require.Zero(t, events, "nothing was ever leased to, routed to or run by the unready agent")
	for _, r := range routesOf(t, pool, early) {
		require.NotEqual(t, unreadyID, r.Preferred)
	}

	// Its tools arrive: the check passes, and it gets work.
	require.NoError(t, os.WriteFile(installed, nil, 0o644))
	require.Equal(t, unreadyID, s.AgentReady(t, "unready"))
	time.Sleep(routerRefresh)
	later := fireAndWait(t, s, jobID, 8, nil)
	routedHere := 0
	for _, id := range later {
		if l := leaseOf(t, s, id); l.ResultBy == unreadyID && l.How == "routed here" {
			routedHere++
		}
	}
	require.Positive(t, routedHere, "once ready, it gets routed work")
	t.Logf("once ready: %d of %d round-robin runs routed to it", routedHere, len(later))
}

// TestWeightedAgentGetsItsShare: AX_AGENT_WEIGHT reaches the server; under
// the weighted strategy an agent of weight 3 gets about three times the
// runs of one of weight 1.
func TestWeightedAgentGetsItsShare(t *testing.T) {
	t.Parallel()
	s := routedServer(t, dbtest.NewURL(t), "30s")
	pool := e2ekit.OpenPool(t, s.DBURL)
	s.RunAgent(t, "heavy", s.URL, "AX_AGENT_WEIGHT=3", "AX_AGENT_CAPACITY=8")
	s.RunAgent(t, "light", s.URL, "AX_AGENT_WEIGHT=1", "AX_AGENT_CAPACITY=8")
	heavyID := s.AgentReady(t, "heavy")
	lightID := s.AgentReady(t, "light")
	require.Equal(t, float64(3), s.AgentNamed(t, "heavy")["weight"])
	require.Equal(t, float64(1), s.AgentNamed(t, "light")["weight"])
	jobID := s.CreateJob(t, map[string]any{
		"name": "weighted", "trigger": e2ekit.Manual, "executor": e2ekit.Shell("echo w"),
		"route": map[string]any{"strategy": "weighted"},
	})
	var runs []string
	for range 5 {
		runs = append(runs, fireAndWait(t, s, jobID, 8, nil)...)
	}
	routed := map[string]int{}
	for _, r := range routesOf(t, pool, runs) {
		routed[r.Preferred]++
	}
	require.Equal(t, routed, ranOn(t, s, runs), "each run ran where it was routed")
	t.Logf("40 weighted runs: heavy %d, light %d", routed[heavyID], routed[lightID])
	require.Equal(t, len(runs), routed[heavyID]+routed[lightID])
	// Binomial(40, 3/4): heavy ≤ light has a probability near 1e-4.
	require.Greater(t, routed[heavyID], routed[lightID])
	require.Positive(t, routed[lightID], "weight 1 still gets work")
}
