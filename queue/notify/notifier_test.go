package notify_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

type env struct {
	t        *testing.T
	pool     *pgxpool.Pool
	notifier *notify.Notifier
}

// setup starts a notifier on the channels of ax against a fresh database
// and waits until it listens.
func setup(t *testing.T) *env {
	t.Helper()
	pool := dbtest.New(t)
	n := notify.NewNotifier(pool, nil, notify.TaskReadyChannel, notify.ExecutionEndedChannel, notify.JobChangedChannel)
	e := &env{t: t, pool: pool, notifier: n}
	ready, unsubscribe := n.Subscribe(notify.TaskReadyChannel)
	defer unsubscribe()
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)
	e.notifyUntil(ready, notify.TaskReadyChannel, "")
	// The first wake-up may be the connect's wake-all, still going through
	// the other channels; one that a notification causes comes after it.
	drain(ready)
	e.notifyUntil(ready, notify.TaskReadyChannel, "")
	return e
}

// notifyUntil sends the notification until ch receives: the LISTEN of a
// notifier that (re)connects may come after the first ones.
func (e *env) notifyUntil(ch <-chan struct{}, channel, payload string) {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		e.send(channel, payload)
		select {
		case <-ch:
			return
		case <-time.After(20 * time.Millisecond):
		case <-deadline:
			e.t.Fatalf("no wake-up on %s", channel)
		}
	}
}

func (e *env) send(channel, payload string) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), "SELECT pg_notify($1, $2)", channel, payload)
	require.NoError(e.t, err)
}

// woken reports whether ch holds a wake-up, after the notifier had time
// to deliver one sent before.
func woken(ch <-chan struct{}, within time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(within):
		return false
	}
}

func drain(ch <-chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

func TestSubscribersOfAChannelWakeAndCoalesce(t *testing.T) {
	e := setup(t)
	a, stopA := e.notifier.Subscribe(notify.TaskReadyChannel)
	defer stopA()
	b, stopB := e.notifier.Subscribe(notify.TaskReadyChannel)
	other, stopOther := e.notifier.Subscribe(notify.JobChangedChannel)
	defer stopOther()

	sentinel, stopSentinel := e.notifier.SubscribeKey(notify.ExecutionEndedChannel, "sentinel")
	defer stopSentinel()
	e.send(notify.TaskReadyChannel, "1")
	e.send(notify.TaskReadyChannel, "2")
	// Notifications arrive in commit order on the one connection: once the
	// sentinel is woken, both above were handled.
	e.send(notify.ExecutionEndedChannel, "sentinel")
	require.True(t, woken(sentinel, 5*time.Second))
	// Two notifications leave one pending wake-up, not a queue.
	require.True(t, woken(a, 0))
	require.False(t, woken(a, 0))
	require.True(t, woken(b, 0))
	require.False(t, woken(other, 0), "a subscriber of another channel stays asleep")

	stopB()
	e.send(notify.TaskReadyChannel, "")
	require.True(t, woken(a, 5*time.Second))
	require.False(t, woken(b, 100*time.Millisecond), "an ended subscription gets nothing")
}

func TestKeyedSubscribersWakeOnlyForTheirKey(t *testing.T) {
	e := setup(t)
	mine, stopMine := e.notifier.SubscribeKey(notify.ExecutionEndedChannel, "exec-1")
	defer stopMine()
	theirs, stopTheirs := e.notifier.SubscribeKey(notify.ExecutionEndedChannel, "exec-2")
	defer stopTheirs()

	e.send(notify.ExecutionEndedChannel, "exec-0,exec-1,exec-3")
	require.True(t, woken(mine, 5*time.Second))
	require.False(t, woken(theirs, 100*time.Millisecond))
}

func TestReconnectWakesEverySubscriber(t *testing.T) {
	e := setup(t)
	plain, stopPlain := e.notifier.Subscribe(notify.TaskReadyChannel)
	defer stopPlain()
	keyed, stopKeyed := e.notifier.SubscribeKey(notify.ExecutionEndedChannel, "exec-1")
	defer stopKeyed()

	// Notifications sent while the connection is down are lost, so a
	// reconnect must wake everyone to look again.
	var killed int
	require.NoError(t, e.pool.QueryRow(context.Background(),
		`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		 WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`).Scan(&killed))
	require.Equal(t, 1, killed, "one LISTEN connection per notifier")
	require.True(t, woken(keyed, 10*time.Second), "keyed subscriber woken by the reconnect")
	require.True(t, woken(plain, 5*time.Second), "plain subscriber woken by the reconnect")

	drain(plain)
	e.notifyUntil(plain, notify.TaskReadyChannel, "")
}

func TestSleep(t *testing.T) {
	wake := make(chan struct{}, 1)
	wake <- struct{}{}
	start := time.Now()
	notify.Sleep(context.Background(), time.Hour, wake, nil)
	require.Less(t, time.Since(start), time.Second, "a pending wake-up ends the sleep")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	notify.Sleep(ctx, time.Hour, nil, nil)

	start = time.Now()
	notify.Sleep(context.Background(), 20*time.Millisecond, nil, nil)
	require.GreaterOrEqual(t, time.Since(start), 20*time.Millisecond)
}

// TestNotifierListensOnAPoolConnection: the notifier's connection is one
// of its pool's, held while it listens, so a replica opens no more
// connections than its pool size; after the connection is lost the pool
// counts the new one in its place, not both.
func TestNotifierListensOnAPoolConnection(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	size := e.pool.Config().MaxConns
	listening := func() bool { return e.pool.Stat().AcquiredConns() == 1 }
	require.Eventually(t, listening, 5*time.Second, 10*time.Millisecond, "the notifier holds one pooled connection")

	// Every other connection of the pool, held at once, and no more.
	var held []*pgxpool.Conn
	for range size - 1 {
		c, err := e.pool.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, c)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err := e.pool.Acquire(short)
	require.ErrorIs(t, err, context.DeadlineExceeded, "the pool is used up: the notifier's connection is counted")
	var backends int32
	require.NoError(t, held[0].QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend'`).Scan(&backends))
	require.Equal(t, size, backends, "the database sees the pool's connections, no more")
	for _, c := range held {
		c.Release()
	}

	plain, stop := e.notifier.Subscribe(notify.TaskReadyChannel)
	defer stop()
	_, err = e.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND query LIKE 'LISTEN%'`)
	require.NoError(t, err)
	require.True(t, woken(plain, 10*time.Second), "woken by the reconnect")
	require.Eventually(t, func() bool { return listening() && e.pool.Stat().TotalConns() <= size },
		5*time.Second, 10*time.Millisecond, "one pooled connection listens again, within the pool's size")
}
