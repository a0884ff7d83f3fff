package dispatch

import (
	"context"
	"slices"
	"sync"
	"time"
)

// batchTimeout bounds one coalesced lease or completion: it serves many
// agents' calls, so no one call's context cancels it.
const batchTimeout = 15 * time.Second

// batchesAtOnce is how many coalesced batches of a kind run at the same
// time: two, so that one's round trips overlap the other's statements,
// and the asks that arrive meanwhile wait for the next.
const batchesAtOnce = 2

// batches coalesces agents' calls that arrive together into one
// transaction: an ask made while batchesAtOnce batches are out waits for
// the next, which serves every ask waiting by then. With 200 agents of 5
// slots each, every lease and every completion was a transaction of its
// own, 2.4 tasks each, and the calls queued for the pool's connections: a
// lease p99 of about 560 ms (BenchmarkManyAgents, #15).
type batches[Q, A any] struct {
	run func(ctx context.Context, asks []*batchAsk[Q, A])
	// split, when set, says which of the waiting asks a batch takes now;
	// the others wait for the next one (nil: all of them).
	split func(waiting []*batchAsk[Q, A]) (now, later []*batchAsk[Q, A])

	mu      sync.Mutex
	waiting []*batchAsk[Q, A]
	running int // batches out; each goes on while asks wait
}

// batchAsk is one call's part of a batch; run answers it on done.
type batchAsk[Q, A any] struct {
	q    Q
	done chan batchAnswer[A]
}

type batchAnswer[A any] struct {
	v   A
	err error
}

// answer answers the ask (once).
func (a *batchAsk[Q, A]) answer(v A, err error) { a.done <- batchAnswer[A]{v: v, err: err} }

// do asks for q in the next batch. When ctx ends first, an ask not yet
// taken is withdrawn; one a batch took is waited for, and its answer is
// returned with ctx's error (a lease's tasks, for the caller to hand
// back).
func (b *batches[Q, A]) do(ctx context.Context, q Q) (A, error) {
	ask := &batchAsk[Q, A]{q: q, done: make(chan batchAnswer[A], 1)}
	b.mu.Lock()
	b.waiting = append(b.waiting, ask)
	start := b.running < batchesAtOnce
	if start {
		b.running++
	}
	b.mu.Unlock()
	if start {
		go b.serve()
	}
	select {
	case a := <-ask.done:
		return a.v, a.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	i := slices.Index(b.waiting, ask)
	if i >= 0 {
		b.waiting = slices.Delete(b.waiting, i, i+1)
	}
	b.mu.Unlock()
	if i >= 0 {
		var none A
		return none, ctx.Err()
	}
	a := <-ask.done
	return a.v, ctx.Err()
}

// serve runs batches of the waiting asks until none waits.
func (b *batches[Q, A]) serve() {
	for {
		b.mu.Lock()
		asks := b.waiting
		b.waiting = nil
		if b.split != nil && len(asks) > 1 {
			asks, b.waiting = b.split(asks)
		}
		if len(asks) == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		b.run(ctx, asks)
		cancel()
	}
}
