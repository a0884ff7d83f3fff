package metrics

import (
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
)

// PoolCollector reports one of the replica's database pools on each
// scrape, read from pgxpool's counters (no query: it answers while the
// pool is exhausted, which is when it matters), labelled pool="engine" or
// pool="requests". Unlike the state gauges these differ per replica:
// aggregate by instance and pool, or sum.
type PoolCollector struct {
	pool *pgxpool.Pool

	acquired, idle, total, maxConns *prometheus.Desc
	acquireDuration                 *prometheus.Desc
	emptyAcquire, emptyAcquireWait  *prometheus.Desc
	canceledAcquire                 *prometheus.Desc
}

// NewPoolCollector returns a collector reading pool's statistics, as the
// pool named name.
func NewPoolCollector(pool *pgxpool.Pool, name string) *PoolCollector {
	labels := prometheus.Labels{"pool": name}
	return &PoolCollector{
		pool:     pool,
		acquired: prometheus.NewDesc("ax_db_pool_acquired_conns", "Database connections in use now (one is the notifier's, held while it listens).", nil, labels),
		idle:     prometheus.NewDesc("ax_db_pool_idle_conns", "Open database connections waiting for use.", nil, labels),
		total: prometheus.NewDesc("ax_db_pool_total_conns",
			"Database connections of the pool: in use, idle and being opened.", nil, labels),
		maxConns: prometheus.NewDesc("ax_db_pool_max_conns",
			"Most connections the pool opens (--db-max-conns for the engine, --db-request-conns for requests); more requests wait.", nil, labels),
		acquireDuration: prometheus.NewDesc("ax_db_pool_acquire_duration_seconds",
			"Time spent getting a connection from the pool: count and sum of every successful acquire "+
				"(sum/count is the mean wait).", nil, labels),
		emptyAcquire: prometheus.NewDesc("ax_db_pool_empty_acquire_total",
			"Acquires that found no idle connection and waited for one to be released or opened.", nil, labels),
		emptyAcquireWait: prometheus.NewDesc("ax_db_pool_empty_acquire_wait_seconds_total",
			"Time the acquires that found no idle connection spent waiting.", nil, labels),
		canceledAcquire: prometheus.NewDesc("ax_db_pool_canceled_acquire_total",
			"Acquires given up (the request ended or timed out) before a connection was free.", nil, labels),
	}
}

// Describe implements prometheus.Collector.
func (c *PoolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.maxConns, c.acquireDuration,
		c.emptyAcquire, c.emptyAcquireWait, c.canceledAcquire} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *PoolCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(s.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(s.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(s.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.maxConns, prometheus.GaugeValue, float64(s.MaxConns()))
	ch <- prometheus.MustNewConstSummary(c.acquireDuration, uint64(s.AcquireCount()), s.AcquireDuration().Seconds(), nil)
	ch <- prometheus.MustNewConstMetric(c.emptyAcquire, prometheus.CounterValue, float64(s.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.emptyAcquireWait, prometheus.CounterValue, s.EmptyAcquireWaitTime().Seconds())
	ch <- prometheus.MustNewConstMetric(c.canceledAcquire, prometheus.CounterValue, float64(s.CanceledAcquireCount()))
}
