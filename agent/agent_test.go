package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The runtime tests below run the agent against serverDouble, the
// in-memory test double of Server; see its comment for what it is not.

func TestAgentNeverRunsMoreThanCapacity(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{Capacity: 2})
	g := newGate()
	a.Handle("block", g.handle)
	for i := range 6 {
		d.add(handlerTask(fmt.Sprint("t", i), "block"))
	}
	start(t, a)

	g.waitStarted(t, 2)
	time.Sleep(100 * time.Millisecond) // room for a wrong third lease
	inside, _ := g.counts()
	require.Equal(t, 2, inside)
	close(g.open)
	eventually(t, func() bool { return d.resultCount() == 6 }, "all six tasks reported")

	_, most := g.counts()
	require.Equal(t, 2, most, "tasks running at once")
	d.snapshot(func(d *serverDouble) {
		for _, l := range d.leases {
			require.True(t, l.Max >= 1 && l.Max <= 2, "lease asked for %d tasks with capacity 2", l.Max)
			require.Equal(t, 1, l.WaitSeconds)
		}
		for _, r := range d.results {
			require.Equal(t, StateSucceeded, r.State)
			require.JSONEq(t, fmt.Sprintf(`{"task": %q}`, r.TaskID), string(r.Result))
		}
	})
}

// TestAgentWithLargeCapacityLeasesInCalls: an agent with more free slots
// than one lease call may ask for (the server refuses more) asks for the
// most it may and fills the rest with the next calls.
func TestAgentWithLargeCapacityLeasesInCalls(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{Capacity: MaxLeasePerCall + 500})
	g := newGate()
	a.Handle("block", g.handle)
	for i := range MaxLeasePerCall + 200 {
		d.add(handlerTask(fmt.Sprint("t", i), "block"))
	}
	start(t, a)

	g.waitStarted(t, MaxLeasePerCall+200)
	close(g.open)
	eventually(t, func() bool { return d.resultCount() == MaxLeasePerCall+200 }, "every task reported")
	d.snapshot(func(d *serverDouble) {
		require.GreaterOrEqual(t, len(d.leases), 2)
		for _, l := range d.leases {
			require.LessOrEqual(t, l.Max, MaxLeasePerCall)
		}
	})
}

func TestAgentHeartbeatRenewsEveryHeldTask(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{Capacity: 5})
	g := newGate()
	a.Handle("block", g.handle)
	d.add(handlerTask("a", "block"), handlerTask("b", "block"), handlerTask("c", "block"))
	start(t, a)
	g.waitStarted(t, 3)

	var want []TaskRef
	d.snapshot(func(d *serverDouble) {
		for _, id := range []string{"a", "b", "c"} {
			want = append(want, TaskRef{TaskID: id, LeaseToken: d.tokens[id]})
		}
	})
	eventually(t, func() bool {
		var ok bool
		d.snapshot(func(d *serverDouble) {
			if len(d.heartbeats) == 0 {
				return
			}
			hb := d.heartbeats[len(d.heartbeats)-1]
			got := slices.Clone(hb.Tasks)
			slices.SortFunc(got, func(x, y TaskRef) int { return strings.Compare(x.TaskID, y.TaskID) })
			ok = slices.Equal(got, want) && hb.Running == 3 && hb.Ready
		})
		return ok
	}, "a heartbeat renewing all three leases")
	close(g.open)
}

func TestAgentLostLeaseStopsTaskAndNeverReportsIt(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{Capacity: 2})
	g := newGate()
	a.Handle("block", g.handle)
	d.add(handlerTask("lost", "block"), handlerTask("kept", "block"))
	start(t, a)
	g.waitStarted(t, 2)

	d.set(func(d *serverDouble) { d.lost["lost"] = true })
	eventually(t, func() bool { return g.stoppedBy("lost") != nil }, "the lost task is cancelled")
	require.ErrorIs(t, g.stoppedBy("lost"), errLeaseLost)
	close(g.open)
	eventually(t, func() bool { _, ok := d.resultOf("kept"); return ok }, "the other task is reported")

	// A heartbeat sent after the task stopped (a sleep of 50 ms saw none
	// under a full make test, and read the one that learned of the loss).
	var beats int
	d.snapshot(func(d *serverDouble) { beats = len(d.heartbeats) })
	eventually(t, func() bool {
		var n int
		d.snapshot(func(d *serverDouble) { n = len(d.heartbeats) })
		return n > beats
	}, "a heartbeat after the task stopped")
	d.snapshot(func(d *serverDouble) {
		for _, batch := range d.completes {
			for _, r := range batch {
				require.NotEqual(t, "lost", r.TaskID, "a task whose lease was lost was reported")
			}
		}
		for _, ref := range d.heartbeats[len(d.heartbeats)-1].Tasks {
			require.NotEqual(t, "lost", ref.TaskID, "the lost lease is still renewed")
		}
	})
	require.Equal(t, 0, a.running.executingCount())
}

func TestAgentServerCancelIsReportedCancelled(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{})
	g := newGate()
	a.Handle("block", g.handle)
	d.add(handlerTask("x", "block"))
	start(t, a)
	g.waitStarted(t, 1)

	d.set(func(d *serverDouble) { d.cancel["x"] = true })
	eventually(t, func() bool { _, ok := d.resultOf("x"); return ok }, "the cancelled task is reported")
	r, _ := d.resultOf("x")
	require.Equal(t, StateCancelled, r.State)
	require.ErrorIs(t, g.stoppedBy("x"), errCancelledByServer)
}

func TestAgentTimeoutReportsTimedOut(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{})
	g := newGate()
	a.Handle("block", g.handle)
	task := handlerTask("slow", "block")
	task.TimeoutSeconds = 1
	d.add(task)
	start(t, a)

	eventually(t, func() bool { _, ok := d.resultOf("slow"); return ok }, "the timed-out task is reported")
	r, _ := d.resultOf("slow")
	require.Equal(t, StateTimedOut, r.State)
	require.Contains(t, r.Error, "timed out after 1 s")
	require.ErrorIs(t, g.stoppedBy("slow"), errTimedOut)
}

func TestAgentDrainFinishesThenReleasesThenDeregisters(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{Capacity: 3, DrainGrace: 300 * time.Millisecond})
	g := newGate()
	a.Handle("block", g.handle)
	a.Handle("quick", func(ctx context.Context, _ Task) (Result, error) {
		select {
		case <-time.After(100 * time.Millisecond): // finishes inside the grace
			return "done", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	d.add(handlerTask("stuck", "block"), handlerTask("quick", "quick"))
	stop := start(t, a)
	g.waitStarted(t, 1)
	var stuckToken string
	d.snapshot(func(d *serverDouble) { stuckToken = d.tokens["stuck"] })

	began := time.Now()
	require.NoError(t, stop())
	require.Less(t, time.Since(began), 5*time.Second)

	require.ErrorIs(t, g.stoppedBy("stuck"), errDrained)
	r, ok := d.resultOf("quick")
	require.True(t, ok, "the task that finished inside the grace is reported")
	require.Equal(t, StateSucceeded, r.State)
	_, ok = d.resultOf("stuck")
	require.False(t, ok, "a released task must not be reported")
	d.snapshot(func(d *serverDouble) {
		require.Equal(t, []TaskRef{{TaskID: "stuck", LeaseToken: stuckToken}}, d.released)
		require.Equal(t, 1, d.deregs)
		last := slices.Index(d.events, "deregister")
		require.Equal(t, len(d.events)-1, last, "deregister is the last call: %v", d.events)
		require.Less(t, slices.Index(d.events, "release"), last)
	})
}

func TestAgentTellsServerItDrains(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{DrainGrace: time.Minute})
	g := newGate()
	a.Handle("block", g.handle)
	d.add(handlerTask("running", "block"))
	stop := start(t, a)
	g.waitStarted(t, 1)

	stopped := goDone(func() { assert.NoError(t, stop()) })
	eventually(t, func() bool {
		var state string
		d.snapshot(func(d *serverDouble) { state = d.state })
		return state == "draining"
	}, "the server hears of the drain while a task still runs")
	inside, _ := g.counts()
	require.Equal(t, 1, inside, "the task runs on through the drain")
	close(g.open)
	require.True(t, waitFor(stopped, 10*time.Second), "Run returns once the task finished")
	r, ok := d.resultOf("running")
	require.True(t, ok, "the task that finished inside the grace is reported")
	require.Equal(t, StateSucceeded, r.State)
	d.snapshot(func(d *serverDouble) {
		drain := slices.Index(d.events, "drain")
		require.NotEqual(t, -1, drain, "events: %v", d.events)
		require.Equal(t, -1, slices.Index(d.events[drain+1:], "drain"), "one drain call: %v", d.events)
		require.Less(t, drain, slices.Index(d.events, "deregister"), "drain before the goodbye: %v", d.events)
	})
}

// TestAgentRenewsLeasesFromWhenTheHeartbeatWasSent: the server renews a
// lease while the heartbeat is on its way, so a late answer (slow network,
// a pause of the process) must not stretch the lease on the agent's side
// past its expiry on the server's.
func TestAgentRenewsLeasesFromWhenTheHeartbeatWasSent(t *testing.T) {
	t.Parallel()
	_, a := agentHolding(t, 5*time.Second, 300*time.Millisecond, time.Now().Add(time.Second))

	sent := time.Now()
	a.heartbeat(t.Context())
	require.GreaterOrEqual(t, time.Since(sent), 300*time.Millisecond, "the answer came late")
	h, ok := a.running.tasks["held"]
	require.True(t, ok)
	require.False(t, h.deadline.After(time.Now().Add(a.leaseDuration()-250*time.Millisecond)),
		"the renewed lease runs from when the heartbeat was sent")
	require.True(t, h.deadline.After(sent.Add(a.leaseDuration()-time.Second)), "the lease was renewed")
}

// TestAgentHeartbeatSlowerThanItsIntervalStillCounts: a server busy
// committing may answer a heartbeat after more than one interval; the
// answer still renews the leases, up to the three intervals after which
// the server would mark the agent offline. A slower one is given up.
func TestAgentHeartbeatSlowerThanItsIntervalStillCounts(t *testing.T) {
	t.Parallel()
	first := time.Now().Add(time.Second)
	d, a := agentHolding(t, 200*time.Millisecond, 350*time.Millisecond, first)

	a.heartbeat(t.Context())
	renewed := a.running.tasks["held"].deadline
	require.True(t, renewed.After(first), "an answer 1.75 intervals late renewed the lease")

	d.set(func(d *serverDouble) { d.hbDelay = time.Second })
	began := time.Now()
	a.heartbeat(t.Context())
	require.Less(t, time.Since(began), 900*time.Millisecond, "given up after three intervals")
	require.Equal(t, renewed, a.running.tasks["held"].deadline, "the answer that never came renewed nothing")
}

// agentHolding returns an agent that heartbeats every interval, has
// registered, and holds task "held" until deadline; the server double
// answers its heartbeats hbDelay late.
func agentHolding(t *testing.T, interval, hbDelay time.Duration, deadline time.Time) (*serverDouble, *Agent) {
	t.Helper()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{HeartbeatInterval: interval})
	_, err := a.sessions.current(t.Context())
	require.NoError(t, err)
	task := handlerTask("held", "none")
	task.LeaseToken = "lease-held"
	d.set(func(d *serverDouble) { d.tokens["held"], d.hbDelay = "lease-held", hbDelay })
	a.running.add(task, func(error) {}, deadline)
	return d, a
}

func TestAgentDrainStopsLeasingAtOnce(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{LeaseWait: 20 * time.Second})
	stop := start(t, a)
	eventually(t, func() bool { var n int; d.snapshot(func(d *serverDouble) { n = len(d.leases) }); return n > 0 },
		"a lease is waiting")

	began := time.Now()
	require.NoError(t, stop())
	require.Less(t, time.Since(began), 2*time.Second, "drain waited for the long poll")
	d.snapshot(func(d *serverDouble) { require.Equal(t, 1, d.deregs) })
}

func TestAgentRegistersAgainWhenTokenRefused(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{})
	a.Handle("ok", func(context.Context, Task) (Result, error) { return nil, nil })
	start(t, a)
	eventually(t, func() bool { var n int; d.snapshot(func(d *serverDouble) { n = len(d.heartbeats) }); return n > 0 },
		"first heartbeat")

	d.revoke()
	eventually(t, func() bool { var n int; d.snapshot(func(d *serverDouble) { n = d.agents }); return n == 2 },
		"the agent registers again")
	d.add(handlerTask("after", "ok"))
	eventually(t, func() bool { _, ok := d.resultOf("after"); return ok }, "work goes on with the new token")
}

func TestAgentRetriesResultsWhileServerAway(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{})
	a.Handle("ok", func(context.Context, Task) (Result, error) { return 42, nil })
	d.failNext("complete", unavailable, errors.New("connection refused"), unavailable)
	d.add(handlerTask("r", "ok"))
	start(t, a)

	eventually(t, func() bool { _, ok := d.resultOf("r"); return ok }, "the result gets through")
	r, _ := d.resultOf("r")
	require.JSONEq(t, `42`, string(r.Result))
	d.snapshot(func(d *serverDouble) { require.Len(t, d.completes, 1, "only the successful try reaches the double") })
}

func TestAgentDropsResultsRefusedAsConflict(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{})
	a.Handle("ok", func(context.Context, Task) (Result, error) { return nil, nil })
	d.set(func(d *serverDouble) { d.conflict["stale"] = true })
	d.add(handlerTask("stale", "ok"))
	start(t, a)

	eventually(t, func() bool { var n int; d.snapshot(func(d *serverDouble) { n = len(d.completes) }); return n == 1 },
		"the result is sent")
	time.Sleep(100 * time.Millisecond)
	d.snapshot(func(d *serverDouble) {
		require.Len(t, d.completes, 1, "a conflict must not be retried")
		for _, hb := range d.heartbeats[len(d.heartbeats)-1:] {
			require.Empty(t, hb.Tasks, "the refused task is still held")
		}
	})
}

func TestAgentReadyOnlyAfterSelfCheck(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	passed := make(chan struct{})
	a := newTestAgent(t, d, Config{SelfCheck: func(ctx context.Context) error {
		select {
		case <-passed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}})
	start(t, a)
	eventually(t, func() bool { var n int; d.snapshot(func(d *serverDouble) { n = len(d.heartbeats) }); return n >= 3 },
		"heartbeats while not ready")
	d.snapshot(func(d *serverDouble) {
		require.False(t, d.heartbeats[0].Ready)
		require.Empty(t, d.leases, "an agent that is not ready must not lease")
	})

	close(passed)
	eventually(t, func() bool {
		var ok bool
		d.snapshot(func(d *serverDouble) { ok = d.heartbeats[len(d.heartbeats)-1].Ready && len(d.leases) > 0 })
		return ok
	}, "ready, then leasing")
}

func TestAgentHandsBackLeasesBeyondCapacity(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	d.set(func(d *serverDouble) { d.extra = 1 })
	a := newTestAgent(t, d, Config{Capacity: 1})
	g := newGate()
	a.Handle("block", g.handle)
	d.add(handlerTask("one", "block"), handlerTask("two", "block"))
	start(t, a)

	g.waitStarted(t, 1)
	eventually(t, func() bool { var n int; d.snapshot(func(d *serverDouble) { n = len(d.released) }); return n == 1 },
		"the extra lease is handed back")
	inside, _ := g.counts()
	require.Equal(t, 1, inside)
	close(g.open)
}

func TestAgentGivesUpLeasesItCannotRenew(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	d.set(func(d *serverDouble) { d.settings.LeaseSeconds = 1 })
	a := newTestAgent(t, d, Config{})
	g := newGate()
	a.Handle("block", g.handle)
	d.add(handlerTask("orphan", "block"))
	start(t, a)
	g.waitStarted(t, 1)

	away := make([]error, 1000)
	for i := range away {
		away[i] = unavailable
	}
	d.failNext("heartbeat", away...)
	d.failNext("complete", away...)
	eventually(t, func() bool { return g.stoppedBy("orphan") != nil }, "the task stops when its lease runs out")
	require.ErrorIs(t, g.stoppedBy("orphan"), errLeaseExpired)
	d.set(func(d *serverDouble) { d.failures = map[string][]error{} })
	time.Sleep(100 * time.Millisecond)
	_, reported := d.resultOf("orphan")
	require.False(t, reported, "a task whose lease ran out must not be reported")
}

func TestAgentShipsOutputBeforeResult(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{})
	a.Handle("talk", func(_ context.Context, t Task) (Result, error) {
		fmt.Fprintf(t.Output, "hello from %s\n", t.IdempotencyKey())
		return nil, nil
	})
	d.add(handlerTask("t", "talk"))
	start(t, a)

	eventually(t, func() bool { _, ok := d.resultOf("t"); return ok }, "reported")
	d.snapshot(func(d *serverDouble) {
		require.Len(t, d.logs, 1)
		require.Equal(t, "hello from exec-t\n", d.logs[0].Data) // one shard: the execution id
		require.Equal(t, streamStdout, d.logs[0].Stream)
		require.Less(t, slices.Index(d.events, "log t"), slices.Index(d.events, "result t"))
	})
}

func TestAgentPausesLeasingWhileServerDrainsIt(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	d.set(func(d *serverDouble) { d.state = "draining" })
	a := newTestAgent(t, d, Config{LeaseWait: time.Second})
	a.Handle("ok", func(context.Context, Task) (Result, error) { return nil, nil })
	start(t, a)
	eventually(t, func() bool { return a.leasePaused.Load() }, "the agent learns it is drained")
	var before int
	d.snapshot(func(d *serverDouble) { before = len(d.leases) })
	time.Sleep(100 * time.Millisecond)
	d.snapshot(func(d *serverDouble) { require.Equal(t, before, len(d.leases), "leasing while drained") })

	d.set(func(d *serverDouble) { d.state = "active" })
	d.add(handlerTask("resumed", "ok"))
	eventually(t, func() bool { _, ok := d.resultOf("resumed"); return ok }, "leasing resumes")
}

// TestAgentLeasesProbesWhileQuarantined: a quarantined agent keeps asking
// for work, since the server restores it only after probe tasks succeed.
func TestAgentLeasesProbesWhileQuarantined(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	d.set(func(d *serverDouble) { d.state = "quarantined" })
	a := newTestAgent(t, d, Config{LeaseWait: time.Second})
	a.Handle("ok", func(context.Context, Task) (Result, error) { return nil, nil })
	start(t, a)
	eventually(t, func() bool {
		var n int
		d.snapshot(func(d *serverDouble) { n = len(d.heartbeats) })
		return n >= 2
	}, "the agent hears it is quarantined")
	require.False(t, a.leasePaused.Load())
	d.add(handlerTask("probe", "ok"))
	eventually(t, func() bool { _, ok := d.resultOf("probe"); return ok }, "the probe runs")
}

// TestAgentReadyOnceCommandPasses: with a self-check command, the agent
// reports not ready and leases nothing until the command succeeds, tried
// again every SelfCheckRetry.
func TestAgentReadyOnceCommandPasses(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	flag := filepath.Join(t.TempDir(), "tools-installed")
	a := newTestAgent(t, d, Config{SelfCheck: CommandSelfCheck("test -e " + flag), SelfCheckRetry: 20 * time.Millisecond})
	start(t, a)
	eventually(t, func() bool {
		var n int
		d.snapshot(func(d *serverDouble) { n = len(d.heartbeats) })
		return n >= 3
	}, "heartbeats while not ready")
	d.snapshot(func(d *serverDouble) {
		for _, hb := range d.heartbeats {
			require.False(t, hb.Ready)
		}
		require.Empty(t, d.leases, "an agent whose check fails must not lease")
	})

	require.NoError(t, os.WriteFile(flag, nil, 0o644))
	eventually(t, func() bool {
		var ok bool
		d.snapshot(func(d *serverDouble) { ok = d.heartbeats[len(d.heartbeats)-1].Ready && len(d.leases) > 0 })
		return ok
	}, "ready once the check passes, then leasing")
}

func TestCommandSelfCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.NoError(t, CommandSelfCheck("exit 0")(ctx))
	require.NoError(t, ShellSelfCheck(ctx))
	err := CommandSelfCheck("echo ffmpeg is missing >&2; exit 3")(ctx)
	require.ErrorContains(t, err, "exit status 3")
	require.ErrorContains(t, err, "ffmpeg is missing")

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	require.Error(t, CommandSelfCheck("sleep 30")(cancelled))
}

// TestCommandSelfCheckEnvironment is not parallel: it sets variables of
// the test process.
func TestCommandSelfCheckEnvironment(t *testing.T) {
	t.Setenv("AX_AGENT_KEY", "secret")
	t.Setenv("TOOLS_DIR", "/opt/tools")
	require.NoError(t, CommandSelfCheck(`[ -z "$AX_AGENT_KEY" ] && [ "$TOOLS_DIR" = /opt/tools ]`)(context.Background()),
		"the command sees the environment less the agent's AX_ variables")
}

func TestAgentRunFailsWhenKeyRefused(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{Key: "wrong"})
	err := a.Run(context.Background())
	require.ErrorIs(t, err, ErrUnauthorized)
	require.Error(t, a.Run(context.Background()), "Run twice")
}

func TestAgentRegistersThroughOutage(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	d.failNext("register", errors.New("connection refused"), unavailable)
	a := newTestAgent(t, d, Config{})
	start(t, a)
	eventually(t, func() bool { var n int; d.snapshot(func(d *serverDouble) { n = d.agents }); return n == 1 },
		"registered after the outage")
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no key":      {URL: "http://127.0.0.1:8080"},
		"no server":   {Key: "k"},
		"bad url":     {Key: "k", URL: "127.0.0.1:8080"},
		"capacity":    {Key: "k", URL: "http://127.0.0.1:1", Capacity: 10001},
		"lease wait":  {Key: "k", URL: "http://127.0.0.1:1", LeaseWait: time.Minute},
		"empty label": {Key: "k", URL: "http://127.0.0.1:1", Labels: map[string]string{"": "v"}},
		"weight":      {Key: "k", URL: "http://127.0.0.1:1", Weight: 1001},
		"neg weight":  {Key: "k", URL: "http://127.0.0.1:1", Weight: -1},
		"neg retry":   {Key: "k", URL: "http://127.0.0.1:1", SelfCheckRetry: -time.Second},
		"plain http":  {Key: "k", URL: "http://ax.example:8080"},
		"ftp":         {Key: "k", URL: "ftp://127.0.0.1"},
	} {
		_, err := New(cfg)
		require.Error(t, err, name)
	}
	a, err := New(Config{Key: "k", URL: "http://127.0.0.1:8080"})
	require.NoError(t, err)
	require.Equal(t, 4, a.cfg.Capacity)
	require.Equal(t, 90*time.Second, a.cfg.DrainGrace)
	require.Equal(t, 10*time.Second, a.cfg.SelfCheckRetry)
	require.Zero(t, a.cfg.Weight, "the server's default weight")
	require.NotEmpty(t, a.cfg.Name)
	for _, u := range []string{"https://ax.example", "http://localhost:8080", "http://[::1]:8080", "http://127.0.0.2"} {
		_, err := New(Config{Key: "k", URL: u})
		require.NoError(t, err, u)
	}
	_, err = New(Config{Key: "k", URL: "http://ax.example:8080", InsecureHTTP: true})
	require.NoError(t, err, "plain http allowed when asked")
}

func TestAgentRunsShellTask(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{SelfCheck: ShellSelfCheck, Executors: []string{KindShell, KindHTTP, KindHandler}})
	d.add(LeasedTask{TaskID: "sh", ExecutionID: "e1", JobID: "j1", ShardIndex: 1, ShardTotal: 2, Attempt: 1,
		Executor: Executor{Kind: KindShell, Command: `echo "shard $AX_SHARD_INDEX of $AX_SHARD_TOTAL"; echo warn >&2; exit 4`}},
		LeasedTask{TaskID: "odd", Executor: Executor{Kind: "python"}})
	start(t, a)

	eventually(t, func() bool { return d.resultCount() == 2 }, "both tasks reported")
	r, _ := d.resultOf("sh")
	require.Equal(t, StateFailed, r.State)
	require.Equal(t, "exit code 4: warn", r.Error)
	require.JSONEq(t, `{"exit_code": 4}`, string(r.Result))
	d.snapshot(func(d *serverDouble) {
		var out, errOut string
		for _, c := range d.logs {
			if c.Stream == streamStdout {
				out += c.Data
			} else {
				errOut += c.Data
			}
		}
		require.Equal(t, "shard 1 of 2\n", out)
		require.Equal(t, "warn\n", errOut)
	})
	r, _ = d.resultOf("odd")
	require.Equal(t, StateFailed, r.State)
	require.Contains(t, r.Error, `executor kind "python" is not supported`)
}

func TestAgentEndGraceHandsBackAtOnce(t *testing.T) {
	t.Parallel()
	d := newServerDouble()
	a := newTestAgent(t, d, Config{DrainGrace: time.Hour})
	g := newGate()
	a.Handle("block", g.handle)
	d.add(handlerTask("long", "block"))
	stop := start(t, a)
	g.waitStarted(t, 1)

	stopped := goDone(func() { assert.NoError(t, stop()) })
	eventually(t, func() bool {
		var told bool
		d.snapshot(func(d *serverDouble) { told = slices.Contains(d.events, "drain") })
		return told
	},
		"draining now, with an hour of grace")
	a.EndGrace()
	a.EndGrace() // a third signal must not panic
	require.True(t, waitFor(stopped, 5*time.Second), "Run waited for the grace")
	require.ErrorIs(t, g.stoppedBy("long"), errDrained)
	d.snapshot(func(d *serverDouble) {
		require.Len(t, d.released, 1)
		require.Empty(t, d.results)
	})
}
