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

// outlookTimeout bounds one read of the waiting polls' outlooks: it
// serves many polls, so no one poll's context cancels it.
const outlookTimeout = 10 * time.Second

// outlooks answers the waiting long polls' "when could I lease?" checks,
// many in one statement: a check made while a read is out waits for the
// next read, which answers every check waiting by then. A task-ready
// NOTIFY wakes every waiting poll of the replica at once, and each used to
// send a statement of its own: 205 transactions a task with 200 agents
// waiting (BenchmarkTrickleCost, #15).
type outlooks struct {
	read func(ctx context.Context, agentIDs []uuid.UUID) (map[uuid.UUID]*axtype.LeaseOutlook, error)

	mu      sync.Mutex
	waiting map[uuid.UUID][]chan outlookAnswer
	reading bool // a goroutine is reading; it answers what waits until none does
}

type outlookAnswer struct {
	outlook *axtype.LeaseOutlook
	err     error
}

// get returns agentID's outlook as of a read that began after the call:
// axtype.ErrNotFound when the agent is gone.
func (o *outlooks) get(ctx context.Context, agentID uuid.UUID) (*axtype.LeaseOutlook, error) {
	answer := make(chan outlookAnswer, 1)
	o.mu.Lock()
	if o.waiting == nil {
		o.waiting = map[uuid.UUID][]chan outlookAnswer{}
	}
	o.waiting[agentID] = append(o.waiting[agentID], answer)
	start := !o.reading
	o.reading = true
	o.mu.Unlock()
	if start {
		go o.readWhileWaiting()
	}
	select {
	case a := <-answer:
		return a.outlook, a.err
	case <-ctx.Done():
		return nil, ctx.Err() // the read answers into the buffered channel all the same
	}
}

// readWhileWaiting reads the outlooks of every waiting check in one
// statement, answers them, and goes on while checks came meanwhile.
func (o *outlooks) readWhileWaiting() {
	for {
		o.mu.Lock()
		batch := o.waiting
		o.waiting = nil
		if len(batch) == 0 {
			o.reading = false
			o.mu.Unlock()
			return
		}
		o.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), outlookTimeout)
		got, err := o.read(ctx, slices.Collect(maps.Keys(batch)))
		cancel()
		for agentID, answers := range batch {
			a := outlookAnswer{err: err}
			if err == nil {
				if a.outlook = got[agentID]; a.outlook == nil {
					a.err = axtype.ErrNotFound
				}
			}
			for _, ch := range answers {
				ch <- a
			}
		}
	}
}
