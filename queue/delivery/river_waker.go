package delivery

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/internal/startstop"
)

// riverInsertChannel is the channel River's producers listen on for new
// jobs (its insert notification, schema-prefixed); the payload names the
// queue to fetch.
const riverInsertChannel = db.Schema + ".river_insert"

// riverWaker tells River's producers to fetch a queue when a job snoozed
// on it comes due, by sending River's insert notification for the queue
// then. Without it only polling finds such a job, and each poll of an
// empty queue is a transaction: ax polled its queues every 100 ms for
// that, busy or idle. It learns of a snooze from River's job_snoozed
// event, which comes once the snooze is committed (a wake taken from the
// worker's return could come before River's completer wrote the snooze,
// and find nothing), and wakes at tick granularity, so a burst of snoozes
// costs at most one notification per queue a tick. The queues are still
// polled, rarely, for what a lost notification, a dropped event or a
// stopped replica leaves.
type riverWaker struct {
	pool   *pgxpool.Pool
	tick   time.Duration
	logger *slog.Logger
	events <-chan *river.Event
	stop   func() // ends the event subscription

	mu     sync.Mutex
	due    wakeHeap
	queued map[wake]bool

	bg startstop.Runner
}

// wake is a queue to notify at a time.
type wake struct {
	at    time.Time
	queue string
}

// snoozeEvents is how many snooze events may wait for the waker; River
// drops (and logs) what does not fit, and the poll finds those jobs.
const snoozeEvents = 10_000

func newRiverWaker(client *river.Client[pgx.Tx], pool *pgxpool.Pool, tick time.Duration, logger *slog.Logger) *riverWaker {
	events, stop := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: snoozeEvents,
		Kinds: []river.EventKind{river.EventKindJobSnoozed}})
	return &riverWaker{pool: pool, tick: tick, logger: logger, events: events, stop: stop, queued: map[wake]bool{}}
}

// snoozed records a committed snooze of a job of queue until at. One
// left to River's scheduler (scheduled, not available) is not woken here.
func (w *riverWaker) snoozed(queue string, state rivertype.JobState, at time.Time) {
	if state != rivertype.JobStateAvailable {
		return
	}
	// Rounded up to the tick: the snoozes of a burst share their wakes.
	k := wake{at: at.Truncate(w.tick).Add(w.tick), queue: queue}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.queued[k] {
		w.queued[k] = true
		heap.Push(&w.due, k)
	}
}

// Start sends the notifications in the background until Stop.
func (w *riverWaker) Start(ctx context.Context) { w.bg.Start(ctx, w.run) }

// Stop ends it and the subscription. Safe to call twice or without Start.
func (w *riverWaker) Stop() {
	w.bg.Stop()
	w.stop()
}

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
		case e, ok := <-w.events:
			if !ok {
				w.events = nil // unsubscribed: only the wakes already due remain
			} else if e.Job != nil {
				w.snoozed(e.Job.Queue, e.Job.State, e.Job.ScheduledAt)
			}
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
