package schedule

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testlog"
)

// The after-firer's and the backfill releaser's loop: a pass at once, the
// next when a notification comes on either of its channels (long before
// maxSleep, a minute here), and a failed pass is logged and followed by
// the next all the same.
func TestPassLoopWakesOnEitherChannel(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	n := notify.NewNotifier(pool, nil, notify.ExecutionEndedChannel, notify.BackfillChannel)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(n.Stop)

	passes := make(chan int, 100)
	var count int
	var logs testlog.Buffer
	loop := passLoop{notifier: n, channels: []string{notify.ExecutionEndedChannel, notify.BackfillChannel},
		minSleep: time.Millisecond, maxSleep: time.Minute, logger: slog.New(slog.NewTextHandler(&logs, nil)),
		msg: "error releasing test passes", pass: func(context.Context) (int, bool, error) {
			count++
			passes <- count
			if count == 1 {
				return 0, false, errors.New("the first pass fails")
			}
			return 0, false, nil
		}}
	var bg startstop.Runner
	loop.start(context.Background(), &bg)
	t.Cleanup(bg.Stop)

	waitPass := func(channel string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			// Sent until a pass comes: the notifier's LISTEN may come after
			// the first notifications.
			_, err := pool.Exec(context.Background(), "SELECT pg_notify($1, '')", channel)
			require.NoError(t, err)
			select {
			case <-passes:
				return
			case <-time.After(50 * time.Millisecond):
			case <-deadline:
				t.Fatalf("no pass after a notification on %s", channel)
			}
		}
	}
	require.Equal(t, 1, <-passes, "the first pass runs at once")
	waitPass(notify.BackfillChannel)
	waitPass(notify.ExecutionEndedChannel)
	for len(passes) > 0 { // passes the connect's wake-up or extra notifications made
		<-passes
	}
	waitPass(notify.BackfillChannel)
	require.Contains(t, logs.String(), "error releasing test passes")
	require.Contains(t, logs.String(), "the first pass fails")
}

// A pass that stopped at its task bound with work left says so (more),
// and the next pass comes at once, not after maxSleep (a minute here,
// with no notifier): the work past the bound of a pass is not held back.
func TestPassLoopGoesOnAtOnceAfterAPassWithMore(t *testing.T) {
	t.Parallel()
	passes := make(chan int, 100)
	var count int
	loop := passLoop{minSleep: time.Millisecond, maxSleep: time.Minute, logger: slog.New(slog.DiscardHandler),
		pass: func(context.Context) (int, bool, error) {
			count++
			passes <- count
			return 1, count < 4, nil
		}}
	var bg startstop.Runner
	loop.start(context.Background(), &bg)
	t.Cleanup(bg.Stop)
	for want := 1; want <= 4; want++ {
		select {
		case got := <-passes:
			require.Equal(t, want, got)
		case <-time.After(10 * time.Second):
			t.Fatalf("pass %d did not come at once after a pass with more", want)
		}
	}
	select {
	case <-passes:
		t.Fatal("a pass with nothing more was followed at once")
	case <-time.After(200 * time.Millisecond):
	}
}
