package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
)

// An ordered job whose first callback fails for good: runs 2 and 3 wait
// until it is callback_failed (recorded), then go in order.
func TestCallbackOrderedGoesOnAfterFailedForGood(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	var mu sync.Mutex
	var seqs []int64 // of every request, in arrival order
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) bool {
		seq, _ := strconv.ParseInt(r.Header.Get("Ax-Callback-Sequence"), 10, 64)
		mu.Lock()
		seqs = append(seqs, seq)
		mu.Unlock()
		if seq == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return false
		}
		return true
	})
	job := env.job(func(j *axtype.Job) { j.CallbackURL, j.CallbackOrdered = rc.URL, true })
	var execs []*axtype.Execution
	for range 3 {
		e := env.trigger(job.ID)
		env.cancel(e.ID)
		execs = append(execs, e)
	}

	env.eventually("delivered", 10*time.Second, "SELECT state::text FROM ax.callback WHERE execution_id = $1", execs[2].ID)
	require.Equal(t, "callback_failed", env.scalar("SELECT state::text FROM ax.callback WHERE execution_id = $1", execs[0].ID))
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int64{1, 1, 1, 1, 1, 1, 2, 3}, seqs, "six attempts of 1 (the last failing for good), then 2 and 3")
	for i, r := range rc.requests() {
		var p delivery.CallbackPayload
		require.NoError(t, json.Unmarshal(r.body, &p))
		require.Equal(t, seqs[i], p.Sequence, "the body's sequence is the header's")
	}
}

// Callbacks of one job enqueued by concurrent transactions get 1..n
// without a gap or a duplicate, and the counter ends at n.
func TestCallbackSequenceGapFreeUnderConcurrentEnds(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.Callback.RetrySchedule = []time.Duration{time.Hour} })
	job := env.job(func(j *axtype.Job) { j.CallbackURL = "http://127.0.0.1:1/never" })
	const n = 20
	ids := make([]*axtype.Execution, n)
	for i := range ids {
		ids[i] = env.trigger(job.ID)
	}
	var wg sync.WaitGroup
	for _, e := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := env.execs.Cancel(context.Background(), e.ID, "test")
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	env.eventually(int64(0), 10*time.Second, "SELECT count(*) FROM ax.callback WHERE job_id = $1 AND sequence IS NULL", job.ID)
	rows, err := env.pool.Query(context.Background(), "SELECT sequence FROM ax.callback WHERE job_id = $1 ORDER BY sequence", job.ID)
	require.NoError(t, err)
	var got []int64
	for rows.Next() {
		var s int64
		require.NoError(t, rows.Scan(&s))
		got = append(got, s)
	}
	require.NoError(t, rows.Err())
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i + 1)
	}
	require.Equal(t, want, got)
	require.EqualValues(t, n, env.scalar("SELECT last_sequence FROM ax.callback_sequence WHERE job_id = $1", job.ID))
}
