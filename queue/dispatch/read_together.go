package dispatch

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// readTimeout bounds one read of readTogether: it serves many calls, so
// no one call's context cancels it.
const readTimeout = 10 * time.Second

// readTogether answers reads of rows by id, many in one statement: a
// read asked while one is out waits for the next, which answers every
// read waiting by then. Every call of a long poll reads rows by agent id,
// and 200 agents' calls come together:
//   - the waiting polls' "when could I lease?" checks (TaskNextLeasable):
//     a task-ready NOTIFY wakes every waiting poll of the replica at
//     once, and each used to send a statement of its own: 205
//     transactions a task with 200 agents waiting (BenchmarkTrickleCost,
//     #15);
//   - the agent row every lease call starts with: 22,271 statements of
//     their own in one BenchmarkManyAgents run, 5% of the replica's CPU
//     (#43).
type readTogether[T any] struct {
	read func(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]T, error)

	mu      sync.Mutex
	waiting map[uuid.UUID][]chan readAnswer[T]
	reading bool // a goroutine is reading; it answers what waits until none does
}

type readAnswer[T any] struct {
	v   T
	err error
}

// get returns id's row as of a read that began after the call:
// axtype.ErrNotFound when the read did not find it.
func (r *readTogether[T]) get(ctx context.Context, id uuid.UUID) (T, error) {
	answer := make(chan readAnswer[T], 1)
	r.mu.Lock()
	if r.waiting == nil {
		r.waiting = map[uuid.UUID][]chan readAnswer[T]{}
	}
	r.waiting[id] = append(r.waiting[id], answer)
	start := !r.reading
	r.reading = true
	r.mu.Unlock()
	if start {
		go r.readWhileWaiting()
	}
	select {
	case a := <-answer:
		return a.v, a.err
	case <-ctx.Done():
		var none T
		return none, ctx.Err() // the read answers into the buffered channel all the same
	}
}

// readWhileWaiting reads the rows of every waiting call in one
// statement, answers them, and goes on while calls came meanwhile.
func (r *readTogether[T]) readWhileWaiting() {
	for {
		r.mu.Lock()
		batch := r.waiting
		r.waiting = nil
		if len(batch) == 0 {
			r.reading = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
		got, err := r.read(ctx, slices.Collect(maps.Keys(batch)))
		cancel()
		for id, answers := range batch {
			a := readAnswer[T]{err: err}
			if err == nil {
				var found bool
				if a.v, found = got[id]; !found {
					a.err = axtype.ErrNotFound
				}
			}
			for _, ch := range answers {
				ch <- a
			}
		}
	}
}
