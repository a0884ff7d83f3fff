package queue

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's Prometheus metrics. Labels stay bounded (no
// job ids): per-job detail is in the database.
type Metrics struct {
	Fires   *prometheus.CounterVec
	Misfire prometheus.Counter
	Skipped *prometheus.CounterVec
	FireLag prometheus.Histogram
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
	for _, c := range []string{"schedule", "catch_up", "manual"} {
		m.Fires.WithLabelValues(c)
	}
	for _, r := range []string{"misfire", "overlap", "paused", "dst_gap"} {
		m.Skipped.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.Fires, m.Misfire, m.Skipped, m.FireLag)
	}
	return m
}
