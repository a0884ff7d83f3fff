package metrics_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

// env is a fresh database with a state collector registered, and the
// services that put rows where the collector reads them.
type env struct {
	t      *testing.T
	pool   *pgxpool.Pool
	reg    *prometheus.Registry
	broker *dispatch.LeaseBroker
	keyID  uuid.UUID
}

func setup(t *testing.T) *env {
	t.Helper()
	t.Parallel()
	pool := dbtest.New(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(metrics.NewStateCollector(pool))
	e := &env{t: t, pool: pool, reg: reg, broker: dispatch.NewLeaseBroker(pool, nil, dispatch.AgentConfig{}, nil, nil)}
	e.keyID = testfactory.APIKey(context.Background(), t, pool, &testfactory.APIKeyOpts{Name: "agents"}).ID
	return e
}

// gauge scrapes and returns the value of the series of name with exactly
// labels; ok is false when there is no such series.
func (e *env) gauge(name string, labels map[string]string) (value float64, ok bool) {
	e.t.Helper()
	families, err := e.reg.Gather()
	require.NoError(e.t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if sameLabels(m.GetLabel(), labels) {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// requireGauge asserts a series' value.
func (e *env) requireGauge(want float64, name string, labels map[string]string) {
	e.t.Helper()
	got, ok := e.gauge(name, labels)
	require.True(e.t, ok, "no series %s%v", name, labels)
	require.InDelta(e.t, want, got, 1e-9, "%s%v", name, labels)
}

func sameLabels(got []*dto.LabelPair, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for _, l := range got {
		if v, ok := want[l.GetName()]; !ok || v != l.GetValue() {
			return false
		}
	}
	return true
}

// agent registers a shell agent; ready says whether it has heartbeated
// ready yet.
func (e *env) agent(labels map[string]string, ready bool) *axtype.Agent {
	e.t.Helper()
	return testfactory.Agent(context.Background(), e.t, e.pool, &testfactory.AgentOpts{Labels: labels, Capacity: 10,
		APIKeyID: e.keyID, NotReady: !ready})
}

// job creates a manual job, or a scheduled one with its first fire
// planned as the job service plans it; mutate adjusts it first.
func (e *env) job(mutate func(j *axtype.Job)) *axtype.Job {
	e.t.Helper()
	ctx := context.Background()
	now, err := db.Now(ctx, e.pool)
	require.NoError(e.t, err)
	return testfactory.Job(ctx, e.t, e.pool, &testfactory.JobOpts{Edit: func(j *axtype.Job) {
		if mutate != nil {
			mutate(j)
		}
		j.NextFireAt, err = schedule.NextFire(j, now)
		require.NoError(e.t, err)
	}})
}

func (e *env) trigger(jobID uuid.UUID) {
	e.t.Helper()
	testfactory.Execution(context.Background(), e.t, e.pool, jobID, nil)
}

// run triggers a job, leases its one task to a and reports state.
func (e *env) run(a *axtype.Agent, jobID uuid.UUID, state axtype.TaskState) {
	e.t.Helper()
	ctx := context.Background()
	e.trigger(jobID)
	tasks, err := e.broker.Lease(ctx, a, 1, 0)
	require.NoError(e.t, err)
	require.Len(e.t, tasks, 1)
	require.Equal(e.t, jobID, tasks[0].JobID)
	done, err := e.broker.Complete(ctx, a.ID, []axtype.TaskResult{{TaskRef: axtype.TaskRef{ID: tasks[0].ID, Token: tasks[0].LeaseToken},
		State: state, Result: json.RawMessage(`{}`)}})
	require.NoError(e.t, err)
	require.Len(e.t, done, 1)
}

func (e *env) exec(sql string, args ...any) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), sql, args...)
	require.NoError(e.t, err)
}

func TestStateCollectorReportsZerosOnAnEmptyDatabase(t *testing.T) {
	e := setup(t)
	none := map[string]string{"class": "none", "priority": "0"}
	e.requireGauge(0, "ax_queue_depth", none)
	e.requireGauge(0, "ax_queue_oldest_wait_seconds", none)
	e.requireGauge(0, "ax_triggers_overdue", nil)
	e.requireGauge(0, "ax_trigger_max_overdue_seconds", nil)
	e.requireGauge(0, "ax_triggers_set_aside", nil)
	_, ok := e.gauge("ax_job_failure_ratio", map[string]string{"job": "x", "group": "default", "owner": ""})
	require.False(t, ok)
}

func TestStateCollectorCountsTheBacklog(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	a := e.agent(nil, true)
	batch := e.job(func(j *axtype.Job) { j.ShardCount = 3 })
	e.trigger(batch.ID)
	e.trigger(batch.ID)
	none0 := map[string]string{"class": "none", "priority": "0"}
	e.requireGauge(6, "ax_queue_depth", none0)

	leased, err := e.broker.Lease(ctx, a, 2, 0)
	require.NoError(t, err)
	require.Len(t, leased, 2)
	e.requireGauge(4, "ax_queue_depth", none0)

	// A failure waiting out its backoff is pending but not ready.
	retried := e.job(func(j *axtype.Job) {
		j.Priority = 1
		j.RetryMaxAttempts = 2
		j.RetryBackoffSeconds = 3600
		j.RetryBackoffMaxSeconds = 3600
	})
	e.run(a, retried.ID, "failed")
	require.Equal(t, 1, e.count(`SELECT count(*) FROM ax.all_tasks WHERE job_id = $1 AND state = 'pending'`, retried.ID))
	_, ok := e.gauge("ax_queue_depth", map[string]string{"class": "none", "priority": "1"})
	require.False(t, ok, "a task waiting for its backoff is no backlog")

	_, err = db.RateClassInsert(ctx, e.pool, &axtype.RateClass{Name: "slow", Rate: 1, Burst: 1})
	require.NoError(t, err)
	e.trigger(e.job(func(j *axtype.Job) { j.RateLimitClass = "slow"; j.Priority = 5 }).ID)
	e.requireGauge(1, "ax_queue_depth", map[string]string{"class": "slow", "priority": "5"})
	e.requireGauge(4, "ax_queue_depth", none0)

	// The oldest wait is that of the oldest ready task, by the database clock.
	var oldest float64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT extract(epoch FROM clock_timestamp() - min(not_before))
		FROM ax.all_tasks WHERE job_id = $1 AND state = 'pending'`, batch.ID).Scan(&oldest))
	got, ok := e.gauge("ax_queue_oldest_wait_seconds", none0)
	require.True(t, ok)
	require.GreaterOrEqual(t, got, oldest)
	require.Less(t, got, oldest+30)
}

func TestStateCollectorCountsAgentsByStateAndPool(t *testing.T) {
	e := setup(t)
	gpu := map[string]string{"pool": "gpu"}
	e.agent(gpu, true)
	e.agent(gpu, true)
	e.agent(gpu, false)
	drained := e.agent(map[string]string{"pool": "cpu"}, true)
	require.NoError(t, e.broker.DrainHold(context.Background(), drained.ID))
	e.job(func(j *axtype.Job) { j.TargetLabels = map[string]string{"pool": "tpu"} })

	e.requireGauge(2, "ax_agents", map[string]string{"state": "active", "ready": "true", "pool": "gpu"})
	e.requireGauge(1, "ax_agents", map[string]string{"state": "active", "ready": "false", "pool": "gpu"})
	e.requireGauge(1, "ax_agents", map[string]string{"state": "draining", "ready": "true", "pool": "cpu"})
	_, ok := e.gauge("ax_agents", map[string]string{"state": "active", "ready": "true", "pool": "cpu"})
	require.False(t, ok, "a drained agent is not counted as active")
	e.requireGauge(0, "ax_agents", map[string]string{"state": "active", "ready": "true", "pool": "tpu"})
}

func TestStateCollectorReportsFailingJobs(t *testing.T) {
	e := setup(t)
	a := e.agent(nil, true)
	flaky := e.job(func(j *axtype.Job) { j.Name = "flaky"; j.Owner = "team-a" })
	for _, state := range []axtype.TaskState{"failed", "succeeded", "failed", "failed"} {
		e.run(a, flaky.ID, state)
	}
	healthy := e.job(func(j *axtype.Job) { j.Name = "healthy" })
	e.run(a, healthy.ID, "succeeded")

	labels := map[string]string{"job": "flaky", "group": "default", "owner": "team-a"}
	e.requireGauge(3.0/4.0, "ax_job_failure_ratio", labels)
	e.requireGauge(4, "ax_job_finished_runs", labels)
	e.requireGauge(2, "ax_job_consecutive_failures", labels)
	_, ok := e.gauge("ax_job_failure_ratio", map[string]string{"job": "healthy", "group": "default", "owner": ""})
	require.False(t, ok, "only jobs with failures are reported")
}

func TestStateCollectorReportsOverdueAndSetAsideTriggers(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	hourly := func(j *axtype.Job) { j.TriggerKind = axtype.TriggerInterval; j.IntervalSeconds = 3600 }

	// The trigger loop sets aside a job whose fire it cannot plan.
	broken := e.job(func(j *axtype.Job) { j.TriggerKind = axtype.TriggerCron; j.CronExpr = "* * * * * *" })
	e.exec(`UPDATE ax.job SET cron_expr = 'not a cron' WHERE id = $1`, broken.ID)
	e.exec(`UPDATE ax.trigger SET next_fire_at = now() - interval '60 seconds' WHERE job_id = $1`, broken.ID)
	loop := schedule.NewTriggerLoop(e.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1})
	_, err := loop.FireDue(ctx)
	require.NoError(t, err)
	got, err := db.JobGetByID(ctx, e.pool, broken.ID)
	require.NoError(t, err)
	require.NotNil(t, got.SetAsideAt)
	e.requireGauge(1, "ax_triggers_set_aside", nil)
	e.requireGauge(0, "ax_triggers_overdue", nil) // a set-aside job is not overdue

	late := e.job(hourly)
	e.exec(`UPDATE ax.trigger SET next_fire_at = now() - interval '90 seconds' WHERE job_id = $1`, late.ID)
	lately := e.job(hourly)
	e.exec(`UPDATE ax.trigger SET next_fire_at = now() - interval '5 seconds' WHERE job_id = $1`, lately.ID)
	paused := e.job(hourly)
	err = db.TriggerPause(ctx, e.pool, paused.ID)
	require.NoError(t, err)
	e.exec(`UPDATE ax.trigger SET next_fire_at = now() - interval '1 hour' WHERE job_id = $1`, paused.ID)

	e.requireGauge(1, "ax_triggers_overdue", nil)
	longest, ok := e.gauge("ax_trigger_max_overdue_seconds", nil)
	require.True(t, ok)
	require.GreaterOrEqual(t, longest, 90.0)
	require.Less(t, longest, 3600.0, "a paused trigger is not overdue")
}

func TestStateCollectorReportsOpenCallbackBreakers(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	_, state, err := db.CallbackBreakerFailure(ctx, e.pool, "down.example", 1, time.Minute)
	require.NoError(t, err)
	require.Equal(t, axtype.BreakerState("open"), state)
	_, _, err = db.CallbackBreakerFailure(ctx, e.pool, "back.example", 1, time.Minute)
	require.NoError(t, err)
	_, err = db.CallbackBreakerSuccess(ctx, e.pool, "back.example")
	require.NoError(t, err)

	e.requireGauge(1, "ax_callback_breaker_open", map[string]string{"host": "down.example"})
	e.requireGauge(0, "ax_callback_breaker_open", map[string]string{"host": "back.example"})

	// A day without a delivery to either host: both are forgotten, the
	// open one too (its series said 1 for ever), and neither is reported.
	e.exec(`UPDATE ax.callback_breaker SET updated_at = now() - interval '25 hours'`)
	n, err := db.CallbackBreakerDeleteIdle(ctx, e.pool)
	require.NoError(t, err)
	require.EqualValues(t, 2, n)
	_, ok := e.gauge("ax_callback_breaker_open", map[string]string{"host": "down.example"})
	require.False(t, ok)
}

func (e *env) count(sql string, args ...any) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}
