package db

import (
	"context"
	"fmt"
	"time"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// CallbackBreakerAdmit asks host's breaker whether a delivery may go; a
// half-open probe older than probeTimeout is taken over.
func CallbackBreakerAdmit(ctx context.Context, e Executor, host string, probeTimeout time.Duration) (axtype.BreakerAdmission, error) {
	r, err := queries.CallbackBreakerAdmit(ctx, e, dbsqlc.CallbackBreakerAdmitParams{Host: host, ProbeSeconds: probeTimeout.Seconds()})
	if err != nil {
		return axtype.BreakerAdmission{}, fmt.Errorf("error checking breaker of %s: %w", host, mapErr(err))
	}
	return axtype.BreakerAdmission{State: axtype.BreakerState(r.State), Probe: r.Probe, OpenUntil: r.OpenUntil.UTC(), Failures: int(r.Failures),
		Now: r.Now.UTC()}, nil
}

// CallbackBreakerFailure counts a failed delivery to host and returns the
// breaker's state before and after.
func CallbackBreakerFailure(ctx context.Context, e Executor, host string, threshold int, openFor time.Duration) (prev, now axtype.BreakerState, err error) {
	r, err := queries.CallbackBreakerFailure(ctx, e, dbsqlc.CallbackBreakerFailureParams{
		Host: host, Threshold: int32(threshold), OpenSeconds: openFor.Seconds()})
	if err != nil {
		return "", "", fmt.Errorf("error recording failure to %s: %w", host, mapErr(err))
	}
	return axtype.BreakerState(r.PrevState), axtype.BreakerState(r.State), nil
}

// CallbackBreakerSuccess closes host's breaker; it returns the state
// before, or "" when nothing needed resetting.
func CallbackBreakerSuccess(ctx context.Context, e Executor, host string) (axtype.BreakerState, error) {
	rows, err := queries.CallbackBreakerSuccess(ctx, e, host)
	if err != nil {
		return "", fmt.Errorf("error recording success to %s: %w", host, mapErr(err))
	}
	if len(rows) == 0 {
		return "", nil
	}
	return axtype.BreakerState(rows[0]), nil
}

// CallbackBreakerDeleteIdle forgets breakers untouched for a day,
// whatever their state.
func CallbackBreakerDeleteIdle(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.CallbackBreakerDeleteIdle(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error deleting idle breakers: %w", mapErr(err))
	}
	return n, nil
}

// CallbackBreakerListRecent returns breakers not closed or changed within a day.
func CallbackBreakerListRecent(ctx context.Context, e Executor) ([]axtype.Breaker, error) {
	rows, err := queries.CallbackBreakerListRecent(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading callback breakers: %w", mapErr(err))
	}
	out := make([]axtype.Breaker, len(rows))
	for i, r := range rows {
		out[i] = axtype.Breaker{Host: r.Host, State: axtype.BreakerState(r.State)}
	}
	return out, nil
}
