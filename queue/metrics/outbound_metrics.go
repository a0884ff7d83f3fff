package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// OutboundMetrics are the metrics of callbacks and agentless HTTP tasks.
// CallbacksFailed is the one to alert on: a receiver missed a result after
// every retry.
type OutboundMetrics struct {
	CallbackAttempts   *prometheus.CounterVec // by outcome: delivered, failed, blocked
	CallbacksDelivered prometheus.Counter
	CallbacksFailed    prometheus.Counter
	CallbacksHeld      prometheus.Counter     // snoozes while a breaker was open or probing, or the host had its most in flight
	CallbackLatency    prometheus.Histogram   // of answered attempts
	BreakerChanges     *prometheus.CounterVec // by state entered: open, closed
	HTTPTaskRequests   *prometheus.CounterVec // by outcome: succeeded, accepted (202), failed
	HTTPTaskSlotWaits  prometheus.Counter     // requests held back by their job's or host's cap
}

// NewOutboundMetrics creates the metrics and registers them with reg
// (nil: not registered, for tests).
func NewOutboundMetrics(reg prometheus.Registerer) *OutboundMetrics {
	m := &OutboundMetrics{
		CallbackAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_callback_attempts_total",
			Help: "Callback delivery attempts by outcome: delivered (2xx), failed (any other answer or none).",
		}, []string{"outcome"}),
		CallbacksDelivered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_callbacks_delivered_total", Help: "Callbacks a receiver accepted.",
		}),
		CallbacksFailed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_callbacks_failed_total",
			Help: "Callbacks given up after every retry (state callback_failed): alert when it moves.",
		}),
		CallbacksHeld: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_callbacks_held_total", Help: "Deliveries held back while their host's circuit breaker was open or probing, or while the replica had as many in flight to the host as it may.",
		}),
		CallbackLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "ax_callback_latency_seconds", Help: "Time for a receiver to answer a callback.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		BreakerChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_callback_breaker_changes_total", Help: "Circuit breakers of callback hosts that opened or closed.",
		}, []string{"state"}),
		HTTPTaskRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ax_http_task_requests_total",
			Help: "Requests of agentless HTTP tasks by outcome: succeeded (2xx), accepted (202, result to follow), failed.",
		}, []string{"outcome"}),
		HTTPTaskSlotWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "ax_http_task_slot_waits_total",
			Help: "Agentless HTTP requests held back (without a worker) because their job or host had as many in flight as it may.",
		}),
	}
	for _, o := range []string{"delivered", "failed"} {
		m.CallbackAttempts.WithLabelValues(o)
	}
	for _, s := range []string{string(axtype.BreakerOpen), string(axtype.BreakerClosed)} {
		m.BreakerChanges.WithLabelValues(s)
	}
	for _, o := range []string{"succeeded", "accepted", "failed"} {
		m.HTTPTaskRequests.WithLabelValues(o)
	}
	if reg != nil {
		reg.MustRegister(m.CallbackAttempts, m.CallbacksDelivered, m.CallbacksFailed, m.CallbacksHeld,
			m.CallbackLatency, m.BreakerChanges, m.HTTPTaskRequests, m.HTTPTaskSlotWaits)
	}
	return m
}
