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

// batchPace is the broker's pace of small leases and results
// (batches.pace), and batchSmall how many tasks or results a batch serves
// at most to be small. In BenchmarkDelayedRuns a pace of 20 ms saved more
// CPU (283 µs a run against 332, one run each), but a lease could then
// wait as long as BenchmarkManyAgents' paced shape allows in all (20 ms).
const (
	batchPace  = 10 * time.Millisecond
	batchSmall = 100
)

// batches coalesces agents' calls that arrive together into one
// transaction: an ask made while batchesAtOnce batches are out waits for
// the next, which serves every ask waiting by then. With 200 agents of 5
// slots each, every lease and every completion was a transaction of its
// own, 2.4 tasks each, and the calls queued for the pool's connections: a
// lease p99 of about 560 ms (BenchmarkManyAgents, #15).
type batches[Q, A any] struct {
	// run answers asks; it returns true when the batch was a small part
	// of a stream, so that the next one keeps pace (see pace).
	run func(ctx context.Context, asks []*batchAsk[Q, A]) (small bool)
	// split, when set, says which of the waiting asks a batch takes now;
	// the others wait for the next one (nil: all of them).
	split func(waiting []*batchAsk[Q, A]) (now, later []*batchAsk[Q, A])
	// pace, when set, spaces the small batches of a stream: after a batch
	// run called small, the next starts no sooner than pace after the
	// one that started last, and takes every ask that came meanwhile.
	// Much of a small statement's cost does not grow with its rows: a due
	// stream of 5,000 runs/s (BenchmarkDelayedRuns) was leased and
	// completed 20 runs a statement, for 167 µs of database time a run;
	// at 50 a statement, 92 (pg_stat_statements). A lone ask after a quiet
	// spell (an idle agent's pickup) is not held: the batch before it
	// served nothing, or started long ago.
	pace time.Duration

	mu        sync.Mutex
	waiting   []*batchAsk[Q, A]
	running   int       // batches out; each goes on while asks wait
	lastStart time.Time // when the batch that started last started
	lastSmall bool      // the batch that ended last was small
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
		// An answer that came as the call ended (both ready: select
		// picks either) goes back with the call's error too: its caller
		// is gone, and a lease's tasks are then handed back.
		if a.err == nil {
			a.err = ctx.Err()
		}
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
		if wait := b.paceLeft(); wait > 0 {
			b.mu.Unlock()
			time.Sleep(wait)
			continue // another batch may have started meanwhile
		}
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
		b.lastStart = time.Now()
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		small := b.run(ctx, asks)
		cancel()
		b.mu.Lock()
		b.lastSmall = small
		b.mu.Unlock()
	}
}

// paceLeft is how long the next batch waits to keep pace (see pace);
// b.mu is held.
func (b *batches[Q, A]) paceLeft() time.Duration {
	if b.pace <= 0 || !b.lastSmall {
		return 0
	}
	return time.Until(b.lastStart.Add(b.pace))
}
