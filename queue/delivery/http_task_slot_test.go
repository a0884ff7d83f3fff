package delivery_test

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
)

// silentHost accepts connections and never answers: a target that hangs.
type silentHost struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	open  int
	most  int // the most connections open at once
}

func newSilentHost(t *testing.T) *silentHost {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &silentHost{ln: ln}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, conn)
			s.open++
			s.most = max(s.most, s.open)
			s.mu.Unlock()
			wg.Go(func() {
				_, _ = conn.Read(make([]byte, 1<<16)) // the request, then nothing until it closes
				for {
					if _, err := conn.Read(make([]byte, 1<<10)); err != nil {
						break
					}
				}
				s.mu.Lock()
				s.open--
				s.mu.Unlock()
			})
		}
	})
	// Registered after the River service: runs before its Stop, so the
	// hanging requests end and the workers can stop.
	t.Cleanup(func() {
		_ = ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	return s
}

func (s *silentHost) counts() (open, most int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.open, s.most
}

// TestSilentTargetDoesNotStarveOtherJobs: jobs of many shards (120, 30,
// 30) aimed at a host that accepts and never answers hold at most
// MaxPerJob requests each and MaxPerHost together (a quarter and a half
// of the 10 HTTP workers); the rest wait without a worker, so another
// job's requests are sent and its run succeeds at once.
func TestSilentTargetDoesNotStarveOtherJobs(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.HTTPWorkers = 10 })
	silent := newSilentHost(t)
	url := "http://" + silent.ln.Addr().String() + "/never"
	var stuck []*axtype.Job
	for _, shards := range []int{120, 30, 30} {
		stuck = append(stuck, env.httpJob(url, func(j *axtype.Job) { j.ShardCount = shards }))
	}
	for _, j := range stuck {
		env.trigger(j.ID)
	}
	require.Eventually(t, func() bool { open, _ := silent.counts(); return open >= 5 }, 10*time.Second, 10*time.Millisecond,
		"the silent host holds requests")

	target := newReceiver(t, nil)
	other := env.httpJob(target.URL, func(j *axtype.Job) { j.ShardCount = 5 })
	start := time.Now()
	exec := env.trigger(other.ID)
	env.eventually("succeeded", 8*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	t.Logf("the other job's 5 requests done in %s", time.Since(start).Round(time.Millisecond))
	require.Len(t, target.requests(), 5)

	env.eventually(int64(0), 10*time.Second, `SELECT count(*) FROM ax.river_job
		WHERE kind = 'ax_http_task' AND attempted_at IS NULL`) // every request had its chance at the silent host
	open, most := silent.counts()
	t.Logf("silent host: %d requests open, at most %d at once", open, most)
	require.LessOrEqual(t, most, 5, "at most MaxPerHost (10/2) requests to one host")
	var perJob int
	require.NoError(t, env.pool.QueryRow(context.Background(),
		`SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM ax.http_task_slot GROUP BY job_id) s`).Scan(&perJob))
	require.LessOrEqual(t, perJob, 2, "at most MaxPerJob (10/4) requests of one job")
	require.Equal(t, int64(open), env.scalar("SELECT count(*) FROM ax.http_task_slot"), "one slot per open request")
}

// TestFreedSlotWakesTheNextRequest: a job capped at one request in flight
// sends its shards one after another, each woken by the answer of the one
// before: its requests over the cap wait a minute before they look for
// room themselves, so the run ends within the test's wait only if every
// answer wakes the next. Nothing is left waiting.
func TestFreedSlotWakesTheNextRequest(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.HTTP.MaxPerJob = 1; c.HTTP.SlotWait = time.Minute })
	target := newReceiver(t, nil)
	job := env.httpJob(target.URL, func(j *axtype.Job) { j.ShardCount = 4 })
	exec := env.trigger(job.ID)
	env.eventually("succeeded", 30*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	require.Len(t, target.requests(), 4)
	require.Equal(t, int64(0), env.scalar("SELECT count(*) FROM ax.http_task_slot_wait"), "no request is left waiting")
	require.Equal(t, int64(0), env.scalar("SELECT count(*) FROM ax.http_task_slot"), "no slot is left held")
}

// TestCancelledRunLeavesNoSlotWait: the requests of a run cancelled while
// they wait for a slot (their job's one slot held by a request to a host
// that never answers) end their waits when they next look, so that no
// wait left behind takes the wake of a request still waiting.
func TestCancelledRunLeavesNoSlotWait(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.HTTP.MaxPerJob = 1; c.HTTP.SlotWait = 500 * time.Millisecond })
	silent := newSilentHost(t)
	job := env.httpJob("http://"+silent.ln.Addr().String()+"/never", func(j *axtype.Job) { j.ShardCount = 3 })
	exec := env.trigger(job.ID)
	env.eventually(int64(2), 10*time.Second, "SELECT count(*) FROM ax.http_task_slot_wait WHERE job_id = $1", job.ID)
	env.cancel(exec.ID)
	env.eventually(int64(0), 10*time.Second, "SELECT count(*) FROM ax.http_task_slot_wait")
}
