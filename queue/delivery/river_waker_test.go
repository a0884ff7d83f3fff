package delivery_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
)

// Work snoozed until its time is fetched when the snooze ends, not when
// River next polls its queue: with the queues polled once an hour, an
// HTTP task's retry a second after a 500 is sent about a second after it,
// and a callback's retry 200 ms after a failed delivery about 200 ms
// after it. The bounds leave seconds for a loaded machine (2 s was missed
// by 0.36 s under the whole suite); a poll, an hour apart, would be far
// past them.
func TestSnoozedWorkStartsWithoutAPoll(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) {
		c.FallbackPoll = time.Hour
		c.Callback.RetrySchedule = []time.Duration{200 * time.Millisecond}
	})
	failFirst := func(n int, w http.ResponseWriter, _ *http.Request) bool {
		if n == 1 {
			http.Error(w, "not yet", http.StatusInternalServerError)
			return false
		}
		return true
	}
	target, hook := newReceiver(t, failFirst), newReceiver(t, failFirst)
	job := env.httpJob(target.URL, func(j *axtype.Job) {
		j.RetryMaxAttempts, j.RetryBackoffSeconds, j.RetryBackoffMaxSeconds = 2, 1, 1
		j.CallbackURL = hook.URL
	})
	exec := env.trigger(job.ID)
	env.eventually("succeeded", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	env.settled(exec.ID)
	for _, c := range []struct {
		name      string
		got       []received
		wait, max time.Duration
	}{
		{"HTTP task", target.requests(), time.Second, 6 * time.Second},
		{"callback", hook.requests(), 200 * time.Millisecond, 5 * time.Second},
	} {
		require.Len(t, c.got, 2, c.name)
		gap := c.got[1].at.Sub(c.got[0].at)
		require.GreaterOrEqual(t, gap, c.wait, "%s: retried before its wait", c.name)
		require.Less(t, gap, c.max, "%s: retried %s after the first attempt (the queue is polled once an hour)", c.name, gap)
	}
}

// A periodic job a killed replica left running holds back no other: the
// rescue of dead replicas' callbacks and HTTP requests (and the outbox
// flush) was unique while one was running, so a replica killed while it
// ran one left no other enqueued until River's rescuer took it, up to
// 100 s later. Here the last rescue run is made to look like a dead
// replica's (running, attempted by a client that is gone); the next runs
// all the same, a second later.
func TestAPeriodicJobLeftRunningHoldsBackNoOther(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.RescueInterval = time.Second })
	var stuck int64
	require.Eventually(t, func() bool {
		err := env.pool.QueryRow(context.Background(), `SELECT id FROM ax.river_job
			WHERE kind = 'ax_rescue' AND state = 'completed' ORDER BY id DESC LIMIT 1`).Scan(&stuck)
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "a rescue runs")
	_, err := env.pool.Exec(context.Background(), `UPDATE ax.river_job
		SET state = 'running', finalized_at = NULL, attempted_by = '{dead-replica}', attempted_at = now()
		WHERE id = $1`, stuck)
	require.NoError(t, err)
	env.eventually(true, 10*time.Second, `SELECT EXISTS (SELECT 1 FROM ax.river_job
		WHERE kind = 'ax_rescue' AND state = 'completed' AND id > $1)`, stuck)
}
