package dispatch_test

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// Health that routing reads (issue #17): the smoothed load, the window of
// least_active's duration tie-break and the error share that quarantines.

// beat heartbeats agent a through broker at the clock's now with the load
// given and returns the agent's smoothed load afterwards.
func (e *clockEnv) beat(broker *dispatch.LeaseBroker, a *axtype.Agent, load axtype.AgentLoad) float64 {
	e.t.Helper()
	ctx := context.Background()
	ready := true
	load.Ready = &ready
	_, err := broker.Heartbeat(ctx, a.ID, nil, &load)
	require.NoError(e.t, err)
	got, err := db.AgentGetByID(ctx, e.pool, a.ID)
	require.NoError(e.t, err)
	return got.Load
}

// The smoothed load is an exponential moving average over
// AgentConfig.LoadSmoothing of the busiest of running/capacity, CPU and
// memory: a first heartbeat's sample is taken as it is; a hot minute
// moves it little; holding a sample for one smoothing time brings it
// 1 - 1/e of the way, however the heartbeats are spaced.
func TestLoadSmoothedOverThreeMinutes(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	require.Equal(t, 3*time.Minute, e.broker.Config().LoadSmoothing, "the default")
	a := e.agent("smoothed") // capacity 4, heartbeated idle: load 0
	require.Zero(t, e.beat(e.broker, a, axtype.AgentLoad{}))

	// A first sample is taken as it is, and it is the busiest dimension.
	for _, tt := range []struct {
		load axtype.AgentLoad
		want float64
	}{
		{load: axtype.AgentLoad{Running: 1, CPU: 0.1, Mem: 0.6}, want: 0.6},
		{load: axtype.AgentLoad{Running: 3, CPU: 0.1, Mem: 0.6}, want: 0.75},
		{load: axtype.AgentLoad{Running: 1, CPU: 0.9, Mem: 0.6}, want: 0.9},
		{load: axtype.AgentLoad{Running: 6}, want: 1.5},
	} {
		_, err := e.pool.Exec(context.Background(), "UPDATE ax.agent SET load_at = NULL WHERE id = $1", a.ID)
		require.NoError(t, err)
		require.InDelta(t, tt.want, e.beat(e.broker, a, tt.load), 1e-9, "%+v on capacity 4", tt.load)
	}
	_, err := e.pool.Exec(context.Background(), "UPDATE ax.agent SET load_at = NULL WHERE id = $1", a.ID)
	require.NoError(t, err)
	require.Zero(t, e.beat(e.broker, a, axtype.AgentLoad{}))

	// One hot heartbeat after 10 s: a spike barely moves the load.
	e.clock.Advance(10 * time.Second)
	spike := e.beat(e.broker, a, axtype.AgentLoad{CPU: 1})
	require.InDelta(t, 1-math.Exp(-10.0/180), spike, 1e-3)
	require.Less(t, spike, 0.1)

	// CPU held at 1 for 3 minutes in all, heartbeats unevenly spaced.
	for _, step := range []time.Duration{5 * time.Second, 40 * time.Second, 25 * time.Second, 100 * time.Second} {
		e.clock.Advance(step)
		e.beat(e.broker, a, axtype.AgentLoad{CPU: 1})
	}
	require.InDelta(t, 1-math.Exp(-1), e.beat(e.broker, a, axtype.AgentLoad{CPU: 1}), 2e-3,
		"after one smoothing time at 1: 1 - 1/e")

	// Idle again for 3 minutes: back down by the same factor.
	e.clock.Advance(3 * time.Minute)
	require.InDelta(t, (1-math.Exp(-1))*math.Exp(-1), e.beat(e.broker, a, axtype.AgentLoad{}), 2e-3)
}

// AgentConfig.LoadSmoothing sets the smoothing time: with one minute, three
// minutes at full CPU bring the load to 1 - e^-3.
func TestLoadSmoothingConfigurable(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	cfg := e.cfg
	cfg.LoadSmoothing = time.Minute
	broker := dispatch.NewLeaseBroker(e.pool, nil, cfg, nil, nil).WithClock(e.clock)
	a := e.agent("quick")
	for range 6 {
		e.clock.Advance(30 * time.Second)
		e.beat(broker, a, axtype.AgentLoad{CPU: 1})
	}
	require.InDelta(t, 1-math.Exp(-3), e.beat(broker, a, axtype.AgentLoad{CPU: 1}), 2e-3)
}

// load_aware reads the smoothed load: a key stays on its owner through a
// CPU spike and moves once the owner has been hot for minutes.
func TestLoadAwareMovesOnlyOnLastingLoad(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{Clock: e.clock, Refresh: time.Nanosecond}, nil, nil)
	require.NoError(t, err)
	e.router = router
	agents := []*axtype.Agent{e.agent("a1"), e.agent("a2")}
	job := e.job(1, 0)
	setRouteKey(t, e, job.ID, "load_aware", "customer-7")
	owner := preferredOf(t, e, e.fire(job).ID)
	var hot, cool *axtype.Agent
	for _, a := range agents {
		if a.ID == owner {
			hot = a
		} else {
			cool = a
		}
	}
	require.NotNil(t, hot)

	e.clock.Advance(5 * time.Second)
	e.beat(e.broker, cool, axtype.AgentLoad{})
	e.beat(e.broker, hot, axtype.AgentLoad{CPU: 1})
	require.Equal(t, owner, preferredOf(t, e, e.fire(job).ID), "a spike does not move the key")

	for range 12 { // 6 minutes at full CPU: load 1 - e^-2 > 0.8
		e.clock.Advance(30 * time.Second)
		e.beat(e.broker, cool, axtype.AgentLoad{})
		e.beat(e.broker, hot, axtype.AgentLoad{CPU: 1})
	}
	require.Equal(t, cool.ID, preferredOf(t, e, e.fire(job).ID), "a lasting load moves the key")
}

func setRouteKey(t *testing.T, e *clockEnv, jobID uuid.UUID, strategy, key string) {
	t.Helper()
	_, err := e.pool.Exec(context.Background(), "UPDATE ax.job SET route_strategy = $2, route_key = $3 WHERE id = $1",
		jobID, strategy, key)
	require.NoError(t, err)
}

func preferredOf(t *testing.T, e *clockEnv, taskID uuid.UUID) uuid.UUID {
	t.Helper()
	var preferred *uuid.UUID
	require.NoError(t, e.pool.QueryRow(context.Background(),
		"SELECT preferred_agent_id FROM ax.all_tasks WHERE id = $1", taskID).Scan(&preferred))
	require.NotNil(t, preferred, "task %s routed", taskID)
	return *preferred
}

// succeed runs one task of job on agent a and records it as a success
// that ended ago before the database's now and lasted took.
func (e *clockEnv) succeed(job *axtype.Job, a *axtype.Agent, ago, took time.Duration) {
	e.t.Helper()
	ctx := context.Background()
	task := e.fire(job)
	leased := e.lease(a)
	require.Len(e.t, leased, 1)
	require.Equal(e.t, task.ID, leased[0].ID)
	_, err := e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: task.ID, Token: leased[0].LeaseToken},
		State: axtype.TaskSucceeded}})
	require.NoError(e.t, err)
	// The run is in history now; what routing reads is the success as its
	// task's row holds it: when it ended and how long from its lease.
	_, err = e.pool.Exec(ctx, `UPDATE ax.task_history SET finished_at = now() - $2 * interval '1 second',
		leased_at = now() - $2 * interval '1 second' - $3 * interval '1 second'
		WHERE id = $1 AND end_event_id IS NOT NULL`, task.ID, ago.Seconds(), took.Seconds())
	require.NoError(e.t, err)
}

// least_active breaks ties between equally idle agents by their average
// task duration over TaskRouterConfig.DurationWindow (default 1 hour):
// "quick" was slow half an hour ago and quick since; "steady" takes 3 s.
// Over the hour, quick averages 5.5 s and loses; over 10 minutes it
// averages 1 s and wins.
func TestLeastActiveDurationWindow(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	quick, steady := e.agent("quick"), e.agent("steady")
	history := e.job(1, 0)
	e.succeed(history, quick, 30*time.Minute, 10*time.Second)
	e.succeed(history, quick, time.Minute, time.Second)
	e.succeed(history, steady, 2*time.Minute, 3*time.Second)

	job := e.job(1, 0)
	setRouteKey(t, e, job.ID, "least_active", "")
	for _, tt := range []struct {
		name   string
		window time.Duration
		want   *axtype.Agent
	}{
		{name: "default hour", want: steady},
		{name: "ten minutes", window: 10 * time.Minute, want: quick},
	} {
		router, err := dispatch.NewTaskRouter(e.cfg, dispatch.TaskRouterConfig{DurationWindow: tt.window}, nil, nil)
		require.NoError(t, err)
		for range 3 { // each run alone: both agents idle every time
			task := testfactory.Task(context.Background(), t, e.pool, job.ID, fireOpts(router))
			require.Equal(t, tt.want.ID, preferredOf(t, e, task.ID), tt.name)
			_, err = e.pool.Exec(context.Background(), "UPDATE ax.task SET state = 'cancelled', finished_at = now() WHERE id = $1",
				task.ID)
			require.NoError(t, err)
		}
	}
}

// report runs one task of job on agent a and reports it with state and
// error text msg.
func (e *clockEnv) report(job *axtype.Job, a *axtype.Agent, state axtype.TaskState, msg string) {
	e.t.Helper()
	e.reportCode(job, a, state, msg, "")
}

// reportCode is report with an error code.
func (e *clockEnv) reportCode(job *axtype.Job, a *axtype.Agent, state axtype.TaskState, msg, code string) {
	e.t.Helper()
	task := e.fire(job)
	leased := e.lease(a)
	require.Len(e.t, leased, 1)
	require.Equal(e.t, task.ID, leased[0].ID)
	_, err := e.broker.Complete(context.Background(), a.ID, []axtype.TaskResult{{
		TaskRef: axtype.TaskRef{ID: task.ID, Token: leased[0].LeaseToken}, State: state, Error: msg, ErrorCode: code}})
	require.NoError(e.t, err)
}

// An error share quarantines an agent whose failures matching the
// configured codes make up that share of its outcomes, well below the
// failure rate: 3 of 10 outcomes with code enospc quarantine with a share
// of 0.3, while 3 of 10 ordinary failures (exit_1, a job's own bug) do
// not. Without codes, every failure counts toward the share.
func TestQuarantineOnErrorShare(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		codes []string
		want  map[string]axtype.AgentState
	}{
		{name: "codes", codes: []string{"enospc", "signal_killed"},
			want: map[string]axtype.AgentState{"disk-full": axtype.AgentQuarantined, "job-bug": axtype.AgentActive, "fine": axtype.AgentActive}},
		{name: "every failure",
			want: map[string]axtype.AgentState{"disk-full": axtype.AgentQuarantined, "job-bug": axtype.AgentQuarantined, "fine": axtype.AgentActive}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := setupClock(t)
			reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{Clock: e.clock,
				Quarantine: axtype.QuarantinePolicy{ErrorShare: 0.3, ErrorCodes: tt.codes}})
			job := e.job(1, 0)
			agents := map[string]*axtype.Agent{}
			errs := map[string]string{"disk-full": "enospc", "job-bug": "exit_1", "fine": ""}
			for name, code := range errs {
				a := e.agent(name)
				agents[name] = a
				for i := range 10 {
					if i < 3 && code != "" {
						e.reportCode(job, a, axtype.TaskFailed, "write /data/out: failed", code)
					} else {
						e.report(job, a, axtype.TaskSucceeded, "")
					}
				}
			}
			require.NoError(t, reaper.Sweep(context.Background()))
			for name, want := range tt.want {
				got, err := db.AgentGetByID(context.Background(), e.pool, agents[name].ID)
				require.NoError(t, err)
				require.Equal(t, want, got.State, name)
			}

			// The failure rate alone (50%) quarantines none of them.
			e2 := setupClock(t)
			plain := dispatch.NewReaper(e2.pool, e2.cfg, dispatch.ReaperConfig{Clock: e2.clock})
			a, job2 := e2.agent("disk-full"), e2.job(1, 0)
			for i := range 10 {
				if i < 3 {
					e2.reportCode(job2, a, axtype.TaskFailed, "write /data/out: failed", errs["disk-full"])
				} else {
					e2.report(job2, a, axtype.TaskSucceeded, "")
				}
			}
			require.NoError(t, plain.Sweep(context.Background()))
			got, err := db.AgentGetByID(context.Background(), e2.pool, a.ID)
			require.NoError(t, err)
			require.Equal(t, axtype.AgentActive, got.State, "without an error share, 30% failures is under the 50% rate")
		})
	}
}

// Only an agent's newest Sample outcomes count toward quarantine, so the
// check reads a bounded number of events however busy the agent was: 8
// failures followed by 6 successes quarantine (8 of 14 fail) with the
// default sample, and do not when the sample is the 6 newest outcomes.
func TestQuarantineCountsTheNewestSample(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		sample int
		want   axtype.AgentState
	}{{sample: 0, want: axtype.AgentQuarantined}, {sample: 6, want: axtype.AgentActive}} {
		t.Run(fmt.Sprintf("sample %d", tt.sample), func(t *testing.T) {
			t.Parallel()
			e := setupClock(t)
			reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{Clock: e.clock,
				Quarantine: axtype.QuarantinePolicy{Sample: tt.sample}})
			a, job := e.agent("recovered"), e.job(1, 0)
			for i := range 14 {
				if i < 8 {
					e.reportCode(job, a, axtype.TaskFailed, "exit status 1", "exit_1")
				} else {
					e.report(job, a, axtype.TaskSucceeded, "")
				}
			}
			require.NoError(t, reaper.Sweep(context.Background()))
			got, err := db.AgentGetByID(context.Background(), e.pool, a.ID)
			require.NoError(t, err)
			require.Equal(t, tt.want, got.State)
		})
	}
}

// Health is judged once per HealthEvery, not on every sweep: the check
// reads every active agent's recent outcomes. Failures recorded after a
// check quarantine their agent at the first sweep HealthEvery after it.
// (The clock runs on from where it is moved, so the steps are long enough
// that a slow machine's own time does not reach the next check; agents
// are not marked offline meanwhile.)
func TestHealthIsCheckedOncePerHealthEvery(t *testing.T) {
	t.Parallel()
	e := setupClock(t)
	reaper := dispatch.NewReaper(e.pool, e.cfg, dispatch.ReaperConfig{Clock: e.clock, HealthEvery: time.Minute,
		OfflineAfter: time.Hour})
	a, job := e.agent("failing"), e.job(1, 0)
	state := func() axtype.AgentState {
		got, err := db.AgentGetByID(context.Background(), e.pool, a.ID)
		require.NoError(t, err)
		return got.State
	}
	require.NoError(t, reaper.Sweep(context.Background()), "a first sweep checks")
	for range 10 {
		e.reportCode(job, a, axtype.TaskFailed, "exit status 1", "exit_1")
	}
	e.clock.Advance(30 * time.Second)
	require.NoError(t, reaper.Sweep(context.Background()))
	require.Equal(t, axtype.AgentActive, state(), "30 s after the last check: not judged yet")
	e.clock.Advance(30 * time.Second)
	require.NoError(t, reaper.Sweep(context.Background()))
	require.Equal(t, axtype.AgentQuarantined, state(), "a minute after it: judged")
}
