package delivery

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/metrics"
)

// breaker is the circuit breaker of callback destinations, one per host,
// kept in Postgres so that every replica sees the same state: closed lets
// deliveries through; after BreakerThreshold consecutive failures it opens
// and holds them (they are snoozed, never dropped) for BreakerOpenFor;
// then one delivery goes as a probe (half-open) and its outcome closes or
// reopens it.
type breaker struct {
	pool    *pgxpool.Pool
	cfg     CallbackConfig
	logger  *slog.Logger
	metrics *metrics.OutboundMetrics
}

// admission is what the breaker said to one delivery.
type admission struct {
	hold  time.Duration // > 0: do not send; look again after this long
	probe bool          // this delivery is the half-open probe
	clean bool          // closed without failures: a success changes nothing
}

// admit says whether a delivery to host may go now, and whether as the
// half-open probe; otherwise how long to hold it.
func (b *breaker) admit(ctx context.Context, host string) (admission, error) {
	a, err := db.CallbackBreakerAdmit(ctx, b.pool, host, b.cfg.BreakerProbeTimeout)
	switch {
	case err != nil:
		return admission{}, err
	case a.Probe:
		b.logger.InfoContext(ctx, "callback breaker half-open: sending one probe", "host", host)
		return admission{probe: true}, nil
	case a.State == axtype.BreakerClosed:
		return admission{clean: a.Failures == 0}, nil
	case a.State == axtype.BreakerOpen && a.OpenUntil.After(a.Now):
		return admission{hold: a.OpenUntil.Sub(a.Now) + b.spread()}, nil
	}
	return admission{hold: b.cfg.HoldRecheck + b.spread()}, nil // a probe is out: wait for its outcome
}

// spread staggers held deliveries so they do not all wake together.
func (b *breaker) spread() time.Duration {
	return time.Duration(rand.Int64N(int64(b.cfg.HoldRecheck)))
}

// record counts a delivery's outcome in tx: unavailable (no answer, 5xx,
// 408, 429) is a failure; any other answer shows the host is up.
func (b *breaker) record(ctx context.Context, tx pgx.Tx, host string, probe, unavailable bool) error {
	if !unavailable {
		prev, err := db.CallbackBreakerSuccess(ctx, tx, host)
		if err == nil && prev != "" && prev != axtype.BreakerClosed {
			b.metrics.BreakerChanges.WithLabelValues(string(axtype.BreakerClosed)).Inc()
			b.logger.InfoContext(ctx, "callback breaker closed", "host", host, "was", prev)
		}
		return err
	}
	prev, now, err := db.CallbackBreakerFailure(ctx, tx, host, b.cfg.BreakerThreshold, b.cfg.BreakerOpenFor)
	if err == nil && now == axtype.BreakerOpen && prev != axtype.BreakerOpen {
		b.metrics.BreakerChanges.WithLabelValues(string(axtype.BreakerOpen)).Inc()
		b.logger.WarnContext(ctx, "callback breaker opened: holding deliveries", "host", host,
			"probe_failed", probe, "open_for", b.cfg.BreakerOpenFor)
	}
	return err
}
