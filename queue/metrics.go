package queue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-scheduler/ax/db"
)

// Metrics are the engine's Prometheus metrics. Labels stay bounded (no
// job ids): per-job detail is in the database.
type Metrics struct {
	Fires   *prometheus.CounterVec
	Misfire prometheus.Counter
	Skipped *prometheus.CounterVec
	FireLag prometheus.Histogram

	Dispatched       *prometheus.CounterVec // by class ("none" without one)
	PickupLatency    prometheus.Histogram
	DispatchFailures prometheus.Counter
	TaskResults      *prometheus.CounterVec
	Retries          prometheus.Counter
	LeaseExpiries    prometheus.Counter

	TasksRouted *prometheus.CounterVec // by strategy and preferred agent
	AgentLeases *prometheus.CounterVec // by agent and how the task came to it
	AgentHealth *prometheus.CounterVec // quarantines and restores
}

// NewMetrics creates the metrics and registers them with reg (nil: not
// registered, for tests).
func NewMetrics(reg prometheus.Registerer) *Metrics {
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
	m.TaskResults = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_task_results_total",
		Help: "Task outcomes: succeeded, failed (for good), cancelled, timed_out; retried failures count as retry.",
	}, []string{"state"})
	m.Retries = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ax_task_retries_total", Help: "Task attempts scheduled again after a failure, lost lease or timeout.",
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
	m.AgentHealth.WithLabelValues("quarantined")
	m.AgentHealth.WithLabelValues("restored")
	for _, s := range []string{"succeeded", "failed", "cancelled", "timed_out"} {
		m.TaskResults.WithLabelValues(s)
	}
	for _, c := range []string{"schedule", "catch_up", "manual"} {
		m.Fires.WithLabelValues(c)
	}
	for _, r := range []string{"misfire", "overlap", "paused", "dst_gap"} {
		m.Skipped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.Fires, m.Misfire, m.Skipped, m.FireLag,
			m.Dispatched, m.PickupLatency, m.DispatchFailures, m.TaskResults, m.Retries, m.LeaseExpiries,
			m.TasksRouted, m.AgentLeases, m.AgentHealth)
	}
	return m
}

// QueueCollector reports the pending backlog on each scrape, read from
// the database (every replica reports the same numbers).
type QueueCollector struct {
	pool      *pgxpool.Pool
	depth     *prometheus.Desc
	oldestAge *prometheus.Desc
}

// NewQueueCollector returns a collector of the backlog in pool.
func NewQueueCollector(pool *pgxpool.Pool) *QueueCollector {
	return &QueueCollector{
		pool:      pool,
		depth:     prometheus.NewDesc("ax_queue_depth", "Pending tasks ready to lease.", nil, nil),
		oldestAge: prometheus.NewDesc("ax_queue_oldest_wait_seconds", "How long the oldest ready pending task has waited.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *QueueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.oldestAge
}

// Collect implements prometheus.Collector.
func (c *QueueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	depth, oldest, err := db.TaskBacklog(ctx, c.pool)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(depth))
	ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, oldest.Seconds())
}
