package delivery

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/migrations"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
)

// riverSchedulerInterval is River's: a job snoozed for less is made
// available at once with its time in the future, and a producer finds it
// only by fetching after that time; a longer snooze is left to River's
// scheduler, which notifies the producers when it makes the job available
// (river v0.51.2, internal/jobexecutor/job_executor.go and
// internal/maintenance/job_scheduler.go).
const riverSchedulerInterval = 5 * time.Second

// riverInsertChannel is the channel River's producers listen on for new
// jobs (its insert notification, schema-prefixed); the payload names the
// queue to fetch.
const riverInsertChannel = migrations.Schema + ".river_insert"

// riverWaker tells River's producers to fetch a queue when a job snoozed
// on it comes due, by sending River's insert notification for the queue
// then. Without it only polling finds such a job, and each poll of an
// empty queue is a transaction: ax polled its queues every 100 ms for
// that, busy or idle. It notifies twice per due time (at it and two ticks
// later: River's completer writes a snooze up to 50 ms after the worker
// returns), at tick granularity, so a burst of snoozes costs at most two
// notifications per queue a tick. The queues are still polled, rarely,
// for what a lost notification or a stopped replica leaves.
type riverWaker struct {
	pool   *pgxpool.Pool
	tick   time.Duration
	logger *slog.Logger

	mu     sync.Mutex
	due    wakeHeap
	queued map[wake]bool
	kick   chan struct{}

	bg startstop.Runner
}

// wake is a queue to notify at a time.
type wake struct {
	at    time.Time
	queue string
}

func newRiverWaker(pool *pgxpool.Pool, tick time.Duration, logger *slog.Logger) *riverWaker {
	return &riverWaker{pool: pool, tick: tick, logger: logger, queued: map[wake]bool{}, kick: make(chan struct{}, 1)}
}

// snoozed records that a job of queue was snoozed for d.
func (w *riverWaker) snoozed(queue string, d time.Duration) {
	if w == nil || d >= riverSchedulerInterval {
		return
	}
	// Rounded up to the tick: the snoozes of a burst share their wakes.
	at := time.Now().Add(max(d, 0)).Truncate(w.tick).Add(w.tick)
	w.mu.Lock()
	earliest := w.due.Len() == 0 || at.Before(w.due[0].at)
	for _, at := range []time.Time{at, at.Add(2 * w.tick)} {
		if k := (wake{at: at, queue: queue}); !w.queued[k] {
			w.queued[k] = true
			heap.Push(&w.due, k)
		}
	}
	w.mu.Unlock()
	if earliest {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// snooze is river.JobSnooze(d) for a job of queue, which the waker wakes
// when d ends.
func (w *riverWaker) snooze(queue string, d time.Duration) error {
	w.snoozed(queue, d)
	return river.JobSnooze(d)
}

// Start sends the notifications in the background until Stop.
func (w *riverWaker) Start(ctx context.Context) { w.bg.Start(ctx, w.run) }

// Stop ends it. Safe to call twice or without Start.
func (w *riverWaker) Stop() { w.bg.Stop() }

func (w *riverWaker) run(ctx context.Context) {
	for {
		queues, next := w.take(time.Now())
		for _, q := range queues {
			if err := notifyQueue(ctx, w.pool, q); err != nil && ctx.Err() == nil {
				w.logger.WarnContext(ctx, "error waking river's producers; the queue's poll finds its jobs", "queue", q, "error", err)
			}
		}
		var timer *time.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = time.NewTimer(time.Until(next))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
		case <-fire:
		case <-w.kick:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// take removes the wakes due by now and returns their queues (each once)
// and when the next is due (zero: none).
func (w *riverWaker) take(now time.Time) (queues []string, next time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[string]bool{}
	for w.due.Len() > 0 && !w.due[0].at.After(now) {
		k := heap.Pop(&w.due).(wake)
		delete(w.queued, k)
		if !seen[k.queue] {
			seen[k.queue] = true
			queues = append(queues, k.queue)
		}
	}
	if w.due.Len() > 0 {
		next = w.due[0].at
	}
	return queues, next
}

// notifyQueue sends River's insert notification for queue, on e (in a
// transaction: at its commit).
func notifyQueue(ctx context.Context, e db.Executor, queue string) error {
	return db.Notify(ctx, e, riverInsertChannel, fmt.Sprintf(`{"queue": %q}`, queue))
}

// wakeHeap orders wakes by time.
type wakeHeap []wake

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeHeap) Push(x any)        { *h = append(*h, x.(wake)) }
func (h *wakeHeap) Pop() any {
	old := *h
	k := old[len(old)-1]
	*h = old[:len(old)-1]
	return k
}
