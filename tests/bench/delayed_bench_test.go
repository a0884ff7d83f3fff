package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/agent"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// The delayed-runs run: delayedRuns runs of one job ("close order <i> 30
// minutes later") inserted through POST /v1/runs/batch over loopback HTTP
// in batches of delayedBatch by delayedPosters clients at once, due from
// a moment after the inserts are expected to end at delayedDueRate per
// second. Of the due stream, the first delayedWindow (AX_BENCH_DUE_SECONDS
// to change it) is measured; the runs due later wait in the table (a
// million-row table is what the trigger loop reads through) and are
// cancelled by key meanwhile at delayedCancelRate per second.
const (
	delayedRuns       = 1_000_000
	delayedBatch      = 1000
	delayedPosters    = 4
	delayedDueRate    = 5000
	delayedWindow     = 20 * time.Second
	delayedCancelRate = 100
	delayedGrace      = 3 * time.Second
)

// BenchmarkDelayedRuns measures seed 001's delayed task at volume:
//   - inserts/s: runs stored per second of the insert phase, over HTTP
//     (goal >= 20,000);
//   - lag-p99-ms: from a run's run_at to its task being leasable (goal <=
//     50): the later of run_at (its task's not_before) and the commit of
//     the transaction that fired it. The commit is seen as the task-ready
//     notification that transaction sends, received by a listener of the
//     benchmark: the first one at or after the execution's fired_at (so
//     the figure includes the notification's delivery, an upper bound). A
//     run not fired by the end of the window plus delayedGrace counts with
//     the lag it had then;
//   - commit-ahead-p1-ms: how long before their run_at the fires
//     committed, the 1st percentile (the closest calls; negative: late);
//   - start-lag-p99-ms: from run_at to the handler starting on one of
//     e2eAgents agents: leasable, then leased over HTTP and handed to the
//     handler;
//   - cancel-p99-ms: POST /v1/runs/cancel of one key, timed by the client,
//     while the million runs wait, before any is due (goal <= 5);
//     cancel-during-due-p99-ms: the same while the due stream fires;
//   - due-cpu-us-per-run: the CPU of this process and of the database's
//     backends from the first run's time to the window's end plus
//     delayedGrace, per run started in the window (due-pg-cpu-us-per-run:
//     the backends'). Everything runs on this machine, so the due stream
//     keeps its time only while that times delayedDueRate fits its cores.
func BenchmarkDelayedRuns(b *testing.B) {
	total := delayedRuns
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_DELAYED_RUNS")); err == nil && v > 0 {
		total = v
	}
	window := delayedWindow
	if v, err := strconv.Atoi(os.Getenv("AX_BENCH_DUE_SECONDS")); err == nil && v > 0 {
		window = time.Duration(v) * time.Second
	}
	dbURL := dbtest.NewURL(b)
	r := startReplica(b, dbURL)
	cpu := newCPUMeter(b, dbURL)
	key, _, err := queue.NewKeyService(r.pool).Create(context.Background(), "bench-submit", []string{queue.ScopeSubmit}, queue.KeyLimits{})
	if err != nil {
		b.Fatal(err)
	}
	lags := &lagLog{}
	r.startAgents(b, e2eAgents, e2eCapacity, func(_ context.Context, t agent.Task) (agent.Result, error) {
		lags.add(t.ScheduledFor, time.Since(t.ScheduledFor))
		return nil, nil
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: delayedPosters + 2}}
	var inserts, lagP50, lagP99, aheadP1, startP50, startP99, cancelP50, cancelP99, dueCancelP99, cancelled float64
	var dueCPU cpuUsage
	var dueRuns int
	n := 0
	for b.Loop() {
		n++
		s := &delayedRun{r: r, key: key, client: client, total: total, pass: n, cancelled: map[int]bool{}}
		// Due from when the inserts should have ended at the goal rate, with
		// a quarter to spare.
		began := time.Now()
		s.firstDue = began.Add(time.Duration(float64(total)/20000*1.25*float64(time.Second)) + 5*time.Second).Truncate(time.Second)
		s.insert(b)
		took := time.Since(began)
		inserts += float64(total) / took.Seconds()
		if time.Now().After(s.firstDue) {
			b.Logf("pass %d: the inserts (%s) ran past the first run's time", n, took.Round(time.Millisecond))
		}
		// Cancels pick runs due after the window: those in it are measured.
		want := int(window.Seconds() * delayedDueRate)
		waiting := s.cancelUntil(b, s.firstDue.Add(-3*time.Second), want)
		commits := s.listenCommits(b)
		time.Sleep(time.Until(s.firstDue))
		windowEnd := s.firstDue.Add(window)
		phase := cpu.start(b)
		r.requests.record()
		during := s.cancelUntil(b, windowEnd, want)
		calls := r.requests.stop()
		time.Sleep(time.Until(windowEnd.Add(delayedGrace)))
		dueCPU = dueCPU.add(phase.end(b))
		leases := 0
		for _, c := range calls {
			if c.lease {
				leases++
			}
		}
		leasable, ahead := s.leasableLags(b, commits(), windowEnd, want)
		started := lags.between(s.firstDue, windowEnd)
		startedN := len(started)
		dueRuns += startedN
		for len(started) < want { // not started by now: as late as it is
			started = append(started, time.Since(windowEnd))
		}
		lagP50 += percentileMillis(leasable, 0.50)
		lagP99 += percentileMillis(leasable, 0.99)
		aheadP1 += percentileMillis(ahead, 0.01)
		startP50 += percentileMillis(started, 0.50)
		startP99 += percentileMillis(started, 0.99)
		cancelP50 += percentileMillis(waiting, 0.50)
		cancelP99 += percentileMillis(waiting, 0.99)
		dueCancelP99 += percentileMillis(during, 0.99)
		cancelled += float64(len(waiting) + len(during))
		b.Logf("pass %d: %d runs inserted in %s; of %d due in the %s window, %d started, over %d lease and %d complete calls; %d cancels while waiting, %d while due",
			n, total, took.Round(time.Millisecond), want, window, startedN, leases, len(calls)-leases, len(waiting), len(during))
		b.Logf("pass %d: vacuums so far: %s", n, r.vacuums(b))
		s.cancelRest(b)
	}
	b.ReportMetric(inserts/float64(n), "inserts/s")
	b.ReportMetric(lagP50/float64(n), "lag-p50-ms")
	b.ReportMetric(lagP99/float64(n), "lag-p99-ms")
	b.ReportMetric(aheadP1/float64(n), "commit-ahead-p1-ms")
	b.ReportMetric(startP50/float64(n), "start-lag-p50-ms")
	b.ReportMetric(startP99/float64(n), "start-lag-p99-ms")
	b.ReportMetric(cancelP50/float64(n), "cancel-p50-ms")
	b.ReportMetric(cancelP99/float64(n), "cancel-p99-ms")
	b.ReportMetric(dueCancelP99/float64(n), "cancel-during-due-p99-ms")
	b.ReportMetric(cancelled/float64(n), "cancels")
	if dueRuns > 0 {
		// Where the due stream's CPU goes: the machine's capacity bounds
		// the lag, and CPU per run is much less noisy than the lag.
		b.ReportMetric(float64(dueCPU.total().Microseconds())/float64(dueRuns), "due-cpu-us-per-run")
		b.ReportMetric(float64(dueCPU.backends.Microseconds())/float64(dueRuns), "due-pg-cpu-us-per-run")
	}
}

// delayedRun is one pass: its runs are run i at firstDue + i/delayedDueRate,
// keyed pass-i.
type delayedRun struct {
	r         *axReplica
	key       string
	client    *http.Client
	total     int
	pass      int
	firstDue  time.Time
	cancelled map[int]bool
}

func (s *delayedRun) runAt(i int) time.Time {
	return s.firstDue.Add(time.Duration(i) * time.Second / delayedDueRate)
}

func (s *delayedRun) runKey(i int) string { return fmt.Sprintf("order-%d-%d", s.pass, i) }

// insert posts every run in batches, delayedPosters at once.
func (s *delayedRun) insert(b *testing.B) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, delayedPosters)
	for range delayedPosters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				from := int(next.Add(delayedBatch)) - delayedBatch
				if from >= s.total {
					return
				}
				if err := s.postBatch(from, min(from+delayedBatch, s.total)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

type benchBatchRun struct {
	JobID          string          `json:"job_id"`
	RunAt          time.Time       `json:"run_at"`
	IdempotencyKey string          `json:"idempotency_key"`
	Params         json.RawMessage `json:"params"`
}

func (s *delayedRun) postBatch(from, to int) error {
	runs := make([]benchBatchRun, 0, to-from)
	for i := from; i < to; i++ {
		runs = append(runs, benchBatchRun{JobID: s.r.jobID.String(), RunAt: s.runAt(i), IdempotencyKey: s.runKey(i),
			Params: json.RawMessage(`{"order":` + strconv.Itoa(i) + `}`)})
	}
	body, err := json.Marshal(map[string]any{"runs": runs})
	if err != nil {
		return err
	}
	status, raw, err := s.post("/v1/runs/batch", body)
	if err != nil {
		return err
	}
	if status != http.StatusAccepted {
		return fmt.Errorf("batch %d-%d: status %d: %.300s", from, to, status, raw)
	}
	return nil
}

func (s *delayedRun) post(path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodPost, s.r.url+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, err = buf.ReadFrom(resp.Body)
	return resp.StatusCode, buf.Bytes(), err
}

// cancelUntil cancels, one key a call, runs from the first-th on (they
// wait meanwhile) at delayedCancelRate until end, and returns each call's
// time. Every call must cancel its run.
func (s *delayedRun) cancelUntil(b *testing.B, end time.Time, first int) []time.Duration {
	total := s.total
	var took []time.Duration
	tick := time.NewTicker(time.Second / delayedCancelRate)
	defer tick.Stop()
	for time.Now().Before(end) {
		<-tick.C
		// A run due within 2 s (fired ahead already, or about to be) is
		// not waiting: pick one due later.
		from := max(first, int(time.Until(s.firstDue.Add(-2*time.Second)).Seconds()*-delayedDueRate))
		if from >= total {
			break
		}
		i := from + rand.IntN(total-from)
		if s.cancelled[i] {
			continue
		}
		s.cancelled[i] = true
		body := []byte(`{"idempotency_keys":["` + s.runKey(i) + `"]}`)
		began := time.Now()
		status, raw, err := s.post("/v1/runs/cancel", body)
		took = append(took, time.Since(began))
		if err != nil || status != http.StatusOK || !bytes.Contains(raw, []byte(`"state":"cancelled"`)) {
			b.Fatalf("cancel %s: status %d, %v: %.300s", s.runKey(i), status, err, raw)
		}
	}
	return took
}

// listenCommits records when task-ready notifications arrive (each fire
// transaction sends one, delivered at its commit) until the returned
// function is called, which returns their times in order.
func (s *delayedRun) listenCommits(b *testing.B) func() []time.Time {
	ctx, stop := context.WithCancel(context.Background())
	conn, err := pgx.ConnectConfig(ctx, s.r.pool.Config().ConnConfig.Copy())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notify.TaskReadyChannel); err != nil {
		b.Fatal(err)
	}
	var got []time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, err := conn.WaitForNotification(ctx); err != nil {
				return
			}
			got = append(got, time.Now())
		}
	}()
	return func() []time.Time {
		stop()
		<-done
		conn.Close(context.Background())
		return got
	}
}

// leasableLags is each run due in the window's lag to leasable: the first
// commit notification at or after its execution's fired_at, less its
// run_at (0 when the commit came first). Runs not fired count as late as
// they are now.
func (s *delayedRun) leasableLags(b *testing.B, commits []time.Time, windowEnd time.Time, want int) (lags, ahead []time.Duration) {
	rows, err := s.r.pool.Query(context.Background(), `SELECT scheduled_for, fired_at FROM ax.all_executions
		WHERE job_id = $1 AND cause = 'delayed' AND scheduled_for >= $2 AND scheduled_for < $3`, s.r.jobID, s.firstDue, windowEnd)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close() // a Fatal with rows open would hang the pool's Close
	var out []time.Duration
	for rows.Next() {
		// (ahead: how long before its run_at the fire committed)
		var runAt, firedAt time.Time
		if err := rows.Scan(&runAt, &firedAt); err != nil {
			b.Fatal(err)
		}
		i, _ := slices.BinarySearchFunc(commits, firedAt, func(c, t time.Time) int { return c.Compare(t) })
		if i == len(commits) {
			// Fired after the listener stopped (the loop fell behind):
			// leasable no sooner than its fire began.
			out = append(out, max(firedAt.Sub(runAt), 0))
			ahead = append(ahead, runAt.Sub(firedAt))
			continue
		}
		out = append(out, max(commits[i].Sub(runAt), 0))
		ahead = append(ahead, runAt.Sub(commits[i]))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	for len(out) < want {
		out = append(out, time.Since(windowEnd))
	}
	return out, ahead
}

// cancelRest cancels what is still waiting (by SQL: the pass is measured),
// so the next pass, and the end, do not fire a million leftover runs.
func (s *delayedRun) cancelRest(b *testing.B) {
	if _, err := s.r.pool.Exec(context.Background(), "DELETE FROM ax.delayed_run"); err != nil {
		b.Fatal(err)
	}
}

// lagLog keeps each started run's lag by its run_at.
type lagLog struct {
	mu   sync.Mutex
	at   []time.Time
	lags []time.Duration
}

func (l *lagLog) add(runAt time.Time, lag time.Duration) {
	l.mu.Lock()
	l.at, l.lags = append(l.at, runAt), append(l.lags, lag)
	l.mu.Unlock()
}

// between returns the lags of the runs due in [from, to).
func (l *lagLog) between(from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for i, at := range l.at {
		if !at.Before(from) && at.Before(to) {
			out = append(out, l.lags[i])
		}
	}
	return out
}
