package dispatch

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/ax-scheduler/ax/db"
)

// leaseBatchTimeout bounds one coalesced lease: it serves many polls, so
// no one poll's context cancels it.
const leaseBatchTimeout = 15 * time.Second

// leaseBatchesAtOnce is how many coalesced leases run at the same time:
// two, so that one's round trips overlap the other's statements, and the
// asks that arrive meanwhile wait for the next.
const leaseBatchesAtOnce = 2

// leaseBatches coalesces the leases of long polls that are due at the
// same time into one transaction (db.TaskLeaseMany): an ask made while
// leaseBatchesAtOnce batches are out waits for the next, which serves
// every ask waiting by then. With 200 agents of 5 slots each, every poll
// used to be a transaction of its own, 2.4 tasks a lease, and the polls
// queued for the pool's connections: a lease p99 of about 560 ms
// (BenchmarkManyAgents, #15).
type leaseBatches struct {
	run func(ctx context.Context, asks []*leaseAsk)

	mu      sync.Mutex
	waiting []*leaseAsk
	running int // batches out; each goes on while asks wait
}

// leaseAsk is one poll's part of a batch; run answers it on done.
type leaseAsk struct {
	agent db.LeaseAgent
	done  chan leaseAnswer
}

type leaseAnswer struct {
	tasks []*db.LeasedTask
	err   error
}

// lease asks for agent's tasks in the next batch. When ctx ends first,
// an ask not yet taken is withdrawn; one a batch took is waited for, and
// its tasks are returned with ctx's error so that the caller hands them
// back.
func (b *leaseBatches) lease(ctx context.Context, agent db.LeaseAgent) ([]*db.LeasedTask, error) {
	ask := &leaseAsk{agent: agent, done: make(chan leaseAnswer, 1)}
	b.mu.Lock()
	b.waiting = append(b.waiting, ask)
	start := b.running < leaseBatchesAtOnce
	if start {
		b.running++
	}
	b.mu.Unlock()
	if start {
		go b.serve()
	}
	select {
	case a := <-ask.done:
		return a.tasks, a.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	i := slices.Index(b.waiting, ask)
	if i >= 0 {
		b.waiting = slices.Delete(b.waiting, i, i+1)
	}
	b.mu.Unlock()
	if i >= 0 {
		return nil, ctx.Err()
	}
	a := <-ask.done
	return a.tasks, ctx.Err()
}

// serve runs batches of the waiting asks until none waits.
func (b *leaseBatches) serve() {
	for {
		b.mu.Lock()
		asks := b.waiting
		b.waiting = nil
		if len(asks) == 0 {
			b.running--
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), leaseBatchTimeout)
		b.run(ctx, asks)
		cancel()
	}
}
