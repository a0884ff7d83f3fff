// Package metrics holds the Prometheus metrics of the engine and the
// collector that reads the state gauges from the database at scrape time.
package metrics

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Steps of a fire that can set a job aside (label of ax_trigger_set_aside_total).
const (
	SetAsidePlan  = "plan"
	SetAsideWrite = "write"
)

// Metrics are the engine's Prometheus metrics. Labels stay bounded (no
// job ids): per-job detail is in the database.
type Metrics struct {
	Fires   *prometheus.CounterVec
	Misfire prometheus.Counter
	Skipped *prometheus.CounterVec
	FireLag prometheus.Histogram
	// SetAside counts jobs the trigger loop stopped firing because a fire
	// of them failed, by the step that failed (plan, write).
	SetAside *prometheus.CounterVec

	Dispatched       *prometheus.CounterVec // by class ("none" without one)
	PickupLatency    prometheus.Histogram
	DispatchFailures prometheus.Counter
	LeaseChecks      prometheus.Counter // waiting polls' checks of when they could lease
	// APITurnWait is how long API calls other than agents' waited for
	// their turn (0 for a call that had one at once); APITurnsRefused
	// counts the calls refused (429) with too many of their key's
	// waiting.
	APITurnWait     prometheus.Histogram
	APITurnsRefused prometheus.Counter
	TaskResults     *TaskResultCounter // by state and error code, the codes capped
	Retries         prometheus.Counter
	LeaseExpiries   prometheus.Counter
	LostLeases      prometheus.Counter // leases lost with their agent

	// TasksRouted and AgentLeases have series per agent id: the reaper of
	// every replica removes those of agents gone offline (ForgetAgents).
	TasksRouted *prometheus.CounterVec // by strategy and preferred agent
	AgentLeases *prometheus.CounterVec // by agent and how the task came to it
	AgentHealth *prometheus.CounterVec // quarantines and restores (no agent label)
	// HistoryRowsDropped counts rows of finished runs removed by retention:
	// of the history tables, events, callbacks, callback attempts and skip
	// records.
	HistoryRowsDropped *prometheus.CounterVec // by table
	// DeclarationConflicts counts declarations of jobs refused as a whole:
	// older than their set's version, or naming jobs another set manages.
	DeclarationConflicts *prometheus.CounterVec // by reason
	// Vacuums and VacuumSeconds count the hot tables' vacuums that ax ran
	// itself (queue/vacuum), and the time they took, by table.
	Vacuums       *prometheus.CounterVec
	VacuumSeconds *prometheus.CounterVec
	// VacuumDenied is 1 for each hot table ax may not vacuum (its role
	// neither owns the table nor the database), which it then leaves to
	// autovacuum.
	VacuumDenied *prometheus.GaugeVec // by table
	// HistoryMaintenanceDenied is 1 while the role of ax may not make or
	// drop history partitions (a runtime role: `ax maintain` as the owner
	// must run instead).
	HistoryMaintenanceDenied prometheus.Gauge
	// NotificationsLost is 1 while NOTIFYs do not reach this replica (a
	// transaction pooler without a direct URL, or a probe that did not
	// come back) and its waiting loops poll instead.
	NotificationsLost prometheus.Gauge
}

// New creates the metrics and registers them with reg (nil: not
// registered, for tests).
func New(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Fires: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_fires_total",
			Help: "Executions created, by cause (schedule, catch_up, manual).",
		}, []string{"cause"}),
		Misfire: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_misfires_total",
			Help: "Ticks that were missed (fired late as catch-up or skipped).",
		}),
		Skipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_skipped_ticks_total",
			Help: "Ticks that did not fire, by reason (misfire, overlap, paused, dst_gap).",
		}, []string{"reason"}),
		FireLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "ax_fire_lag_seconds",
			Help:    "Time from a tick's scheduled time to its tasks being runnable (on-time fires; fires committed ahead count 0).",
			Buckets: []float64{.001, .0025, .005, .01, .02, .05, .1, .25, .5, 1, 2.5, 5},
		}),
	}
	m.SetAside = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_trigger_set_aside_total",
		Help: "Jobs set aside (no longer fired until updated) because a fire of them failed, by step: plan or write.",
	}, []string{"step"})
	m.SetAside.WithLabelValues(SetAsidePlan)
	m.SetAside.WithLabelValues(SetAsideWrite)
	m.HistoryRowsDropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_history_rows_dropped_total",
		Help: "Rows of finished runs removed by retention (a partition dropped), by table.",
	}, []string{"table"})
	for _, table := range []string{"execution_history", "task_history", "task_event", "callback", "callback_attempt",
		"skipped_fire"} {
		m.HistoryRowsDropped.WithLabelValues(table)
	}
	m.DeclarationConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_declaration_conflicts_total",
		Help: "Declarations of jobs refused as a whole, by reason: older_version (older than the set's version) or managed_elsewhere (naming jobs another set manages). GET /v1/declarations shows the last one of each set.",
	}, []string{"reason"})
	m.DeclarationConflicts.WithLabelValues("older_version")
	m.DeclarationConflicts.WithLabelValues("managed_elsewhere")
	m.Vacuums = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_vacuums_total",
		Help: "VACUUMs of hot tables ax ran itself when their dead rows passed its thresholds, by table.",
	}, []string{"table"})
	m.VacuumSeconds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_vacuum_seconds_total",
		Help: "Time spent in those VACUUMs, by table.",
	}, []string{"table"})
	m.VacuumDenied = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_vacuum_denied",
		Help: "1 for each hot table the database role of ax may not vacuum (neither table nor database owner): autovacuum's alone.",
	}, []string{"table"})
	m.HistoryMaintenanceDenied = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ax_history_maintenance_denied",
		Help: "1 while the database role of ax may not make or drop history partitions (not their owner): run `ax maintain` as the owner role, at least daily.",
	})
	m.NotificationsLost = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "ax_notifications_lost",
		Help: "1 while NOTIFYs do not reach this replica (transaction pooler without AX_DIRECT_DATABASE_URL, or an unanswered probe): its waits poll instead.",
	})
	m.Dispatched = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_tasks_dispatched_total", Help: "Tasks leased to agents, by rate class (none without one).",
	}, []string{"class"})
	m.Dispatched.WithLabelValues("none")
	m.PickupLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ax_pickup_latency_seconds",
		Help:    "Time from a task becoming leasable to its lease, by the database clock.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	m.DispatchFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_dispatch_failures_total", Help: "Lease requests that failed with an error.",
	})
	m.LeaseChecks = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_lease_checks_total",
		Help: "Checks by waiting lease requests of when they could lease (read together, a share of one statement each).",
	})
	m.APITurnWait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ax_api_turn_wait_seconds",
		Help:    "Time API calls other than agents' waited for a turn (the request pool's connections), API key by API key in turn.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})
	m.APITurnsRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_api_turns_refused_total",
		Help: "API calls refused (429) because their API key had too many calls waiting for a turn on this replica.",
	})
	m.TaskResults = newTaskResultCounter(MaxErrorCodeLabels)
	m.Retries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_task_retries_total", Help: "Task attempts scheduled again after a failure, timeout or a lease its live agent let expire.",
	})
	m.LostLeases = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_lost_leases_total",
		Help: "Leases lost with their agent (offline or silent): the task runs again on the same attempt, or fails as lost at the cap.",
	})
	m.LeaseExpiries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_lease_expiries_total", Help: "Leases that ran out without a heartbeat (agent dead or cut off).",
	})
	m.TasksRouted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_tasks_routed_total", Help: "Tasks given a preferred agent, by strategy and agent id.",
	}, []string{"strategy", "agent"})
	m.AgentLeases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_agent_leases_total",
		Help: "Tasks leased per agent id, by how: routed (preferred it or unassigned) or taken_over (stolen after the steal delay).",
	}, []string{"agent", "how"})
	m.AgentHealth = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_agent_health_changes_total", Help: "Agents quarantined for failing, or restored after probes succeeded.",
	}, []string{"change"})
	m.AgentHealth.WithLabelValues(string(axtype.AgentQuarantined))
	m.AgentHealth.WithLabelValues("restored")
	for _, s := range []axtype.TaskState{axtype.TaskSucceeded, axtype.TaskFailed, axtype.TaskCancelled} {
		m.TaskResults.With(string(s), "")
	}
	m.TaskResults.With(string(axtype.TaskTimedOut), axtype.ErrorCodeTimeout) // agents and the reaper give timeouts this code
	for _, c := range []axtype.ExecutionCause{axtype.CauseSchedule, axtype.CauseCatchUp, axtype.CauseManual, axtype.CauseDelayed, axtype.CauseRerun, axtype.CauseBackfill} {
		m.Fires.WithLabelValues(string(c))
	}
	for _, r := range []axtype.SkipReason{axtype.SkipMisfire, axtype.SkipOverlap, axtype.SkipPaused, axtype.SkipDSTGap} {
		m.Skipped.WithLabelValues(string(r))
	}
	if reg != nil {
		reg.MustRegister(m.Fires, m.Misfire, m.Skipped, m.FireLag, m.SetAside,
			m.Dispatched, m.PickupLatency, m.DispatchFailures, m.LeaseChecks, m.TaskResults, m.Retries, m.LeaseExpiries, m.LostLeases,
			m.TasksRouted, m.AgentLeases, m.AgentHealth, m.HistoryRowsDropped, m.DeclarationConflicts, m.Vacuums, m.VacuumSeconds,
			m.VacuumDenied, m.HistoryMaintenanceDenied, m.NotificationsLost, m.APITurnWait, m.APITurnsRefused)
	}
	return m
}

// APITurnWaited records how long an API call waited for its turn.
func (m *Metrics) APITurnWaited(d time.Duration) { m.APITurnWait.Observe(d.Seconds()) }

// APITurnRefused counts an API call refused with its key's calls waiting.
func (m *Metrics) APITurnRefused() { m.APITurnsRefused.Inc() }

// AgentSeries returns the agent ids that have series of their own in
// TasksRouted or AgentLeases, each once.
func (m *Metrics) AgentSeries() []string {
	seen := map[string]bool{}
	for _, vec := range []*prometheus.CounterVec{m.TasksRouted, m.AgentLeases} {
		for _, id := range labelValues(vec, "agent") {
			seen[id] = true
		}
	}
	return slices.Collect(maps.Keys(seen))
}

// ForgetAgents removes the series of the agents ids from TasksRouted and
// AgentLeases. Their ids are never seen again (an agent that registers
// again gets a new one), and without this a replica would keep a series
// of every agent that ever leased or was routed a task from it, and put
// them all in every scrape.
func (m *Metrics) ForgetAgents(ids []string) {
	for _, id := range ids {
		m.TasksRouted.DeletePartialMatch(prometheus.Labels{"agent": id})
		m.AgentLeases.DeletePartialMatch(prometheus.Labels{"agent": id})
	}
}

// labelValues returns the values label takes in c's series.
func labelValues(c prometheus.Collector, label string) []string {
	ch := make(chan prometheus.Metric)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	var values []string
	for metric := range ch {
		var d dto.Metric
		if metric.Write(&d) != nil {
			continue
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == label {
				values = append(values, l.GetValue())
			}
		}
	}
	return values
}

// StateCollector reports on each scrape what lives in the database and
// every replica shares: the ready backlog by rate class and priority,
// agents by state and pool, failing jobs and overdue triggers. All
// replicas report the same numbers, so alert on max(), not sum().
type StateCollector struct {
	pool *pgxpool.Pool

	depth, oldestAge         *prometheus.Desc
	agents                   *prometheus.Desc
	jobFailureRatio, jobRuns *prometheus.Desc
	jobStreak                *prometheus.Desc
	overdue, overdueLongest  *prometheus.Desc
	setAside                 *prometheus.Desc
	breakerOpen              *prometheus.Desc
	keysAtLimit, keyWaiting  *prometheus.Desc
}

// failureWindow is the window of the failing-job metrics (and alerts).
const failureWindow = 10 * time.Minute

// overdueAfter is how late a trigger must be to count as overdue: well
// past the misfire threshold, so a busy second is not an alert.
const overdueAfter = 30 * time.Second

// NewStateCollector returns a collector reading pool.
func NewStateCollector(pool *pgxpool.Pool) *StateCollector {
	job := []string{"job", "group", "owner"}
	return &StateCollector{
		pool: pool,
		depth: prometheus.NewDesc("ax_queue_depth", "Pending tasks ready to lease, by rate class (none without) and priority.",
			[]string{"class", "priority"}, nil),
		oldestAge: prometheus.NewDesc("ax_queue_oldest_wait_seconds",
			"How long the oldest ready pending task has waited, by rate class and priority.", []string{"class", "priority"}, nil),
		agents: prometheus.NewDesc("ax_agents", "Agents by state, readiness and pool label (pools that jobs target show 0 when empty).",
			[]string{"state", "ready", "pool"}, nil),
		jobFailureRatio: prometheus.NewDesc("ax_job_failure_ratio",
			"Failed share of a job's runs that ended in the last 10 minutes; only jobs with failures.", job, nil),
		jobRuns: prometheus.NewDesc("ax_job_finished_runs",
			"Runs of a job that ended in the last 10 minutes; only jobs with failures.", job, nil),
		jobStreak: prometheus.NewDesc("ax_job_consecutive_failures",
			"How many of a job's latest runs failed in a row (up to 20); only jobs with recent failures.", job, nil),
		overdue: prometheus.NewDesc("ax_triggers_overdue",
			"Unpaused triggers more than 30 s past their fire time: schedules that did not fire when due.", nil, nil),
		overdueLongest: prometheus.NewDesc("ax_trigger_max_overdue_seconds",
			"How far past its fire time the latest due trigger is.", nil, nil),
		setAside: prometheus.NewDesc("ax_triggers_set_aside",
			"Jobs the trigger loop stopped firing because a fire of them failed, until they are updated (SELECT * FROM ax.set_aside_jobs).", nil, nil),
		breakerOpen: prometheus.NewDesc("ax_callback_breaker_open",
			"1 while the circuit breaker of a callback host holds deliveries (open or probing), else 0.", []string{"host"}, nil),
		keysAtLimit: prometheus.NewDesc("ax_concurrency_keys_at_limit",
			"Concurrency keys at their limit with ready tasks waiting, by scope (group:<name>, or job:<group>/<name> "+
				"for a job's own keys); SELECT * FROM ax.tasks_without_agent names them.", []string{"scope"}, nil),
		keyWaiting: prometheus.NewDesc("ax_concurrency_waiting_tasks",
			"Ready tasks waiting because their concurrency key is at its limit, by scope.", []string{"scope"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *StateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.depth, c.oldestAge, c.agents, c.jobFailureRatio, c.jobRuns,
		c.jobStreak, c.overdue, c.overdueLongest, c.setAside, c.breakerOpen, c.keysAtLimit, c.keyWaiting} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *StateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	for _, collect := range []func(context.Context, chan<- prometheus.Metric) error{
		c.collectBacklog, c.collectAgents, c.collectJobs, c.collectOverdue, c.collectBreakers, c.collectConcurrency,
	} {
		if err := collect(ctx, ch); err != nil {
			ch <- prometheus.NewInvalidMetric(c.depth, err)
		}
	}
}

func (c *StateCollector) collectBacklog(ctx context.Context, ch chan<- prometheus.Metric) error {
	backlog, err := db.TaskCountBacklog(ctx, c.pool)
	if err != nil {
		return err
	}
	if len(backlog) == 0 { // an empty queue is a zero, not a missing series
		backlog = []axtype.Backlog{{}}
	}
	for _, b := range backlog {
		class, priority := cmp.Or(b.Class, "none"), strconv.Itoa(b.Priority)
		ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(b.Depth), class, priority)
		ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, b.OldestWait.Seconds(), class, priority)
	}
	return nil
}

// collectConcurrency reports the concurrency keys holding tasks back; a
// scope with none has no series (key scopes come and go with jobs).
func (c *StateCollector) collectConcurrency(ctx context.Context, ch chan<- prometheus.Metric) error {
	scopes, err := db.TaskConcurrencyWaiting(ctx, c.pool)
	if err != nil {
		return err
	}
	for _, s := range scopes {
		ch <- prometheus.MustNewConstMetric(c.keysAtLimit, prometheus.GaugeValue, float64(s.KeysAtLimit), s.Scope)
		ch <- prometheus.MustNewConstMetric(c.keyWaiting, prometheus.GaugeValue, float64(s.Waiting), s.Scope)
	}
	return nil
}

func (c *StateCollector) collectAgents(ctx context.Context, ch chan<- prometheus.Metric) error {
	counts, pools, err := db.AgentCountByState(ctx, c.pool)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, a := range counts {
		ready := strconv.FormatBool(a.Ready)
		seen[string(a.State)+"/"+ready+"/"+a.Pool] = true
		ch <- prometheus.MustNewConstMetric(c.agents, prometheus.GaugeValue, float64(a.Agents), string(a.State), ready, a.Pool)
	}
	for _, pool := range pools {
		if !seen[string(axtype.AgentActive)+"/true/"+pool] {
			ch <- prometheus.MustNewConstMetric(c.agents, prometheus.GaugeValue, 0, string(axtype.AgentActive), "true", pool)
		}
	}
	return nil
}

func (c *StateCollector) collectJobs(ctx context.Context, ch chan<- prometheus.Metric) error {
	jobs, err := db.JobListFailing(ctx, c.pool, failureWindow)
	if err != nil {
		return err
	}
	for _, j := range jobs {
		ch <- prometheus.MustNewConstMetric(c.jobFailureRatio, prometheus.GaugeValue,
			float64(j.Failed)/float64(max(j.Finished, 1)), j.Name, j.Group, j.Owner)
		ch <- prometheus.MustNewConstMetric(c.jobRuns, prometheus.GaugeValue, float64(j.Finished), j.Name, j.Group, j.Owner)
		ch <- prometheus.MustNewConstMetric(c.jobStreak, prometheus.GaugeValue, float64(j.ConsecutiveFailures),
			j.Name, j.Group, j.Owner)
	}
	return nil
}

func (c *StateCollector) collectOverdue(ctx context.Context, ch chan<- prometheus.Metric) error {
	o, err := db.TriggerCountOverdue(ctx, c.pool, overdueAfter)
	if err != nil {
		return err
	}
	ch <- prometheus.MustNewConstMetric(c.overdue, prometheus.GaugeValue, float64(o.Late))
	ch <- prometheus.MustNewConstMetric(c.overdueLongest, prometheus.GaugeValue, o.Longest.Seconds())
	ch <- prometheus.MustNewConstMetric(c.setAside, prometheus.GaugeValue, float64(o.SetAside))
	return nil
}

func (c *StateCollector) collectBreakers(ctx context.Context, ch chan<- prometheus.Metric) error {
	breakers, err := db.CallbackBreakerListRecent(ctx, c.pool)
	if err != nil {
		return err
	}
	for _, b := range breakers {
		open := 0.0
		if b.State != axtype.BreakerClosed {
			open = 1
		}
		ch <- prometheus.MustNewConstMetric(c.breakerOpen, prometheus.GaugeValue, open, b.Host)
	}
	return nil
}
