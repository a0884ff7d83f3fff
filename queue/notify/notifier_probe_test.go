package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/pgbouncertest"
)

// TestProbeFindsNotificationsLost: a notifier that listens through a
// transaction pooler (it was not told) hears nothing; its probe NOTIFY
// does not come back, so it says so (Degraded, the gauge) and wakes its
// subscribers every PollEvery instead.
func TestProbeFindsNotificationsLost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pooled := pgbouncertest.Start(t, dbtest.NewURL(t))
	pool, err := db.OpenPoolWith(ctx, pooled, db.PoolOptions{Size: db.PoolSize{MaxConns: 3}, BehindPooler: true})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	lost := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lost"})
	n := notify.NewNotifierWith(pool, notify.NotifierConfig{ProbeTimeout: 300 * time.Millisecond,
		PollEvery: 50 * time.Millisecond, Lost: lost}, notify.TaskReadyChannel)
	woken, unsubscribe := n.Subscribe(notify.TaskReadyChannel)
	defer unsubscribe()
	require.NoError(t, n.Start(ctx))
	t.Cleanup(n.Stop)

	require.Eventually(t, func() bool { return n.Degraded() != "" }, 10*time.Second, 20*time.Millisecond,
		"the probe after connecting finds notifications lost")
	require.Contains(t, n.Degraded(), "a probe NOTIFY did not come back")
	require.Equal(t, 1.0, gaugeValue(t, lost))
	drain(woken)
	for range 3 {
		select {
		case <-woken:
		case <-time.After(2 * time.Second):
			t.Fatal("no polling wake-up while notifications are lost")
		}
	}
}

// TestProbeFindsNotificationsArrive: listening on a direct connection of
// its own (DirectURL) while probing through the pooler, the notifier
// hears its probe and nothing is degraded.
func TestProbeFindsNotificationsArrive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	direct := dbtest.NewURL(t)
	pooled := pgbouncertest.Start(t, direct)
	pool, err := db.OpenPoolWith(ctx, pooled, db.PoolOptions{Size: db.PoolSize{MaxConns: 3}, BehindPooler: true})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	lost := prometheus.NewGauge(prometheus.GaugeOpts{Name: "lost"})
	n := notify.NewNotifierWith(pool, notify.NotifierConfig{DirectURL: direct, ProbeEvery: 100 * time.Millisecond,
		Lost: lost}, notify.TaskReadyChannel)
	woken, unsubscribe := n.Subscribe(notify.TaskReadyChannel)
	defer unsubscribe()
	require.NoError(t, n.Start(ctx))
	t.Cleanup(n.Stop)
	<-woken // connected: the connect's wake-all
	_, err = pool.Exec(ctx, "SELECT pg_notify($1, '')", notify.TaskReadyChannel)
	require.NoError(t, err)
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("a NOTIFY through the pooler reaches the direct listener")
	}
	require.Never(t, func() bool { return n.Degraded() != "" }, 500*time.Millisecond, 20*time.Millisecond,
		"several probes came back")
	require.Equal(t, 0.0, gaugeValue(t, lost))
}

// TestNoDeliveryPollsFromTheStart: told notifications cannot arrive, the
// notifier does not listen, is degraded from Start and polls.
func TestNoDeliveryPollsFromTheStart(t *testing.T) {
	t.Parallel()
	n := notify.NewNotifierWith(dbtest.New(t), notify.NotifierConfig{NoDelivery: true, PollEvery: 20 * time.Millisecond},
		notify.TaskReadyChannel)
	woken, unsubscribe := n.Subscribe(notify.TaskReadyChannel)
	defer unsubscribe()
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	require.Contains(t, n.Degraded(), "AX_DIRECT_DATABASE_URL")
	for range 3 {
		select {
		case <-woken:
		case <-time.After(2 * time.Second):
			t.Fatal("no polling wake-up")
		}
	}
}

func gaugeValue(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	require.NoError(t, g.Write(&m))
	return m.GetGauge().GetValue()
}

// TestAfterCommitWakesAtOnceOnlyWhileLost: while notifications are lost,
// AfterCommit wakes the replica's own subscribers (of the channel, and of
// the listed keys only) at once rather than at the next poll; while they
// arrive it does nothing, since the NOTIFY itself will wake them.
func TestAfterCommitWakesAtOnceOnlyWhileLost(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	lost := notify.NewNotifierWith(pool, notify.NotifierConfig{NoDelivery: true, PollEvery: time.Second},
		notify.TaskReadyChannel, notify.ExecutionEndedChannel)
	require.NoError(t, lost.Start(context.Background()))
	t.Cleanup(lost.Stop)
	tasks, unsubscribe := lost.Subscribe(notify.TaskReadyChannel)
	defer unsubscribe()
	mine, unsubscribeMine := lost.SubscribeKey(notify.ExecutionEndedChannel, "e1")
	defer unsubscribeMine()
	other, unsubscribeOther := lost.SubscribeKey(notify.ExecutionEndedChannel, "e9")
	defer unsubscribeOther()
	// Polls wake everyone every second: look right after a poll's
	// wake-up, once it has woken all three (it wakes the keys' subscribers
	// after the channels': draining them after the first alone raced it).
	<-tasks
	<-mine
	<-other
	polled := time.Now()
	lost.AfterCommit(notify.TaskReadyChannel)
	lost.AfterCommit(notify.ExecutionEndedChannel, "e0", "e1")
	for _, ch := range []<-chan struct{}{tasks, mine} {
		select {
		case <-ch:
		case <-time.After(500 * time.Millisecond):
			t.Fatal("AfterCommit did not wake a subscriber while notifications are lost")
		}
	}
	select {
	case <-other:
		// Only a poll may have: when one may have come since, say nothing.
		if time.Since(polled) < 800*time.Millisecond {
			t.Fatal("AfterCommit woke the subscriber of a key it did not list")
		}
	default:
	}

	arriving := notify.NewNotifierWith(pool, notify.NotifierConfig{}, notify.TaskReadyChannel)
	woken, unsubscribeArriving := arriving.Subscribe(notify.TaskReadyChannel)
	defer unsubscribeArriving()
	arriving.AfterCommit(notify.TaskReadyChannel) // not started: not lost
	select {
	case <-woken:
		t.Fatal("AfterCommit woke a subscriber while notifications arrive")
	default:
	}
	var none *notify.Notifier
	none.AfterCommit(notify.TaskReadyChannel) // no notifier: nothing to wake
}
