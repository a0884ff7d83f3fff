package dispatch_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
)

func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, c.Write(&m))
	return m.GetCounter().GetValue()
}

// sweepUntil sweeps until cond holds (a lease has to run out first).
func (e *env) sweepUntil(r *dispatch.Reaper, cond func() bool, msg string) {
	e.t.Helper()
	e.eventually(func() bool {
		require.NoError(e.t, r.Sweep(context.Background()))
		return cond()
	}, msg)
}

func TestReaperRetriesAnExpiredLeaseThenFails(t *testing.T) {
	e := setup(t, func(c *dispatch.AgentConfig) { c.Lease = 200 * time.Millisecond })
	ctx := context.Background()
	m := metrics.New(nil)
	// The reaper takes an agent silent for a minute to be dead with its
	// leases: these agents are not, and an expired lease is the attempt's
	// failure (TestReaperRunsALostLeaseAgain has the dead agents).
	reaper := dispatch.NewReaper(e.pool, dispatch.AgentConfig{Lease: time.Minute}, dispatch.ReaperConfig{Metrics: m})
	exec := e.trigger(e.job(func(j *axtype.Job) { j.RetryMaxAttempts = 2 }).ID)
	a, b := e.agent(nil, nil), e.agent(nil, nil)

	first := e.lease(a, 1)
	require.Len(t, first, 1)
	require.Equal(t, 1, first[0].Attempt)
	task := first[0].ID

	// A task leased from a broker with long leases must outlive the sweeps.
	longBroker := dispatch.NewLeaseBroker(e.pool, nil, dispatch.AgentConfig{Lease: time.Minute}, nil, nil)
	keep := e.trigger(e.job(nil).ID)
	kept, err := longBroker.Lease(ctx, e.agent(nil, nil), 1, 0)
	require.NoError(t, err)
	require.Len(t, kept, 1)
	require.Equal(t, keep.ID, kept[0].ExecutionID)
	e.sweepUntil(reaper, func() bool { return e.task(task).State == "pending" }, "the expired lease to be reaped")
	reaped := e.task(task)
	require.Equal(t, 2, reaped.Attempt, "an expired lease of a live agent uses up an attempt")
	require.Equal(t, "lease expired", reaped.Error)
	require.Equal(t, axtype.ExecutionState("running"), e.execution(exec.ID).State)
	require.Equal(t, 1.0, counter(t, m.LeaseExpiries))
	require.Equal(t, 1.0, counter(t, m.Retries))

	hb, err := e.broker.Heartbeat(ctx, a.ID, []axtype.TaskRef{{ID: task, Token: first[0].LeaseToken}}, &axtype.AgentLoad{})
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{task}, hb.Lost, "the agent learns its lease is gone")
	done, err := e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task, Token: first[0].LeaseToken}, State: "succeeded"}})
	require.NoError(t, err)
	require.Empty(t, done, "a result after the lease ran out counts for nothing")

	second := e.lease(b, 1)
	require.Len(t, second, 1)
	require.Equal(t, task, second[0].ID)
	require.Equal(t, 2, second[0].Attempt)
	e.sweepUntil(reaper, func() bool { return e.task(task).State != "leased" }, "the second lease to be reaped")
	require.Equal(t, axtype.TaskState("failed"), e.task(task).State, "attempts spent: the task fails")
	ended := e.execution(exec.ID)
	require.Equal(t, axtype.ExecutionState("failed"), ended.State)
	require.NotNil(t, ended.FinishedAt)
	require.Equal(t, 2.0, counter(t, m.LeaseExpiries))

	require.Equal(t, axtype.TaskState("leased"), e.task(kept[0].ID).State, "a current lease is never reaped")
}

func TestReaperTakesSilentAgentsOffline(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	exec := e.trigger(e.job(nil).ID)
	a := e.agent(nil, nil)

	patient := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{OfflineAfter: time.Minute})
	require.NoError(t, patient.Sweep(ctx))
	got, err := e.broker.Get(ctx, a.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.AgentState("active"), got.State, "an agent heard from within OfflineAfter stays")

	strict := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{OfflineAfter: 200 * time.Millisecond})
	e.sweepUntil(strict, func() bool {
		got, err := e.broker.Get(ctx, a.ID)
		require.NoError(t, err)
		return got.State == "offline"
	}, "the silent agent to go offline")
	require.Empty(t, e.lease(a, 1), "an offline agent gets nothing, even through a poll that began before")
	require.Equal(t, axtype.ExecutionState("pending"), e.execution(exec.ID).State)

	state, err := e.broker.Heartbeat(ctx, a.ID, nil, &axtype.AgentLoad{})
	require.NoError(t, err)
	require.Equal(t, "active", state.State, "a heartbeat brings it back")
	require.Len(t, e.lease(a, 1), 1)
}

// agentSeries returns the agent label of each series of reg's metric
// name.
func agentSeries(t *testing.T, reg *prometheus.Registry, name string) []string {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var agents []string
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "agent" {
					agents = append(agents, l.GetValue())
				}
			}
		}
	}
	return agents
}

// TestGoneAgentsLeaveTheMetricsOfEveryReplica: the series an agent has in
// ax_agent_leases_total and ax_tasks_routed_total go once it is offline,
// from every replica that has them, not only the one whose reaper marked
// it offline; a live agent's stay. Agent ids change with every
// registration, so before, each replica's /metrics grew by the agents of
// every restart and kept them for good.
func TestGoneAgentsLeaveTheMetricsOfEveryReplica(t *testing.T) {
	e := setup(t, nil)
	ctx := context.Background()
	type replica struct {
		reg    *prometheus.Registry
		m      *metrics.Metrics
		broker *dispatch.LeaseBroker
		reaper *dispatch.Reaper
	}
	replicas := make([]*replica, 2)
	for i := range replicas {
		reg := prometheus.NewPedanticRegistry()
		m := metrics.New(reg)
		replicas[i] = &replica{reg: reg, m: m, broker: dispatch.NewLeaseBroker(e.pool, nil, e.cfg, nil, m),
			reaper: dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{Metrics: m, Interval: 10 * time.Millisecond,
				ForgetEvery: 10 * time.Millisecond})}
	}
	// The first replica routes the run: two tasks to each agent.
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{Refresh: time.Nanosecond}, nil, replicas[0].m)
	require.NoError(t, err)
	e.router = router
	gone, stays := e.agent(nil, nil), e.agent(nil, nil)
	e.trigger(e.job(func(j *axtype.Job) { j.ShardCount = 4 }).ID)
	for _, r := range replicas {
		for _, a := range []*axtype.Agent{gone, stays} {
			leased, err := r.broker.Lease(ctx, a, 1, 0)
			require.NoError(t, err)
			require.Len(t, leased, 1)
		}
	}
	both := []string{gone.ID.String(), stays.ID.String()}
	for _, r := range replicas {
		require.ElementsMatch(t, both, agentSeries(t, r.reg, "ax_agent_leases_total"))
	}
	require.ElementsMatch(t, both, agentSeries(t, replicas[0].reg, "ax_tasks_routed_total"))

	// One agent falls silent; the first replica's reaper marks it offline.
	_, err = e.pool.Exec(ctx, "UPDATE ax.agent SET last_heartbeat_at = now() - interval '1 minute' WHERE id = $1", gone.ID)
	require.NoError(t, err)
	require.NoError(t, replicas[0].reaper.Sweep(ctx))
	got, err := e.broker.Get(ctx, gone.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.AgentOffline, got.State)

	for _, r := range replicas {
		require.NoError(t, r.reaper.Start(ctx))
		t.Cleanup(r.reaper.Stop)
	}
	e.eventually(func() bool {
		for _, r := range replicas {
			if len(agentSeries(t, r.reg, "ax_agent_leases_total")) != 1 {
				return false
			}
		}
		return len(agentSeries(t, replicas[0].reg, "ax_tasks_routed_total")) == 1
	}, "the offline agent's series to go from both replicas")
	for i, r := range replicas {
		require.Equal(t, []string{stays.ID.String()}, agentSeries(t, r.reg, "ax_agent_leases_total"), "replica %d", i)
	}
	require.Equal(t, []string{stays.ID.String()}, agentSeries(t, replicas[0].reg, "ax_tasks_routed_total"))
}
