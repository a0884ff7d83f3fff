package queue

import (
	"context"
	"sync"

	"github.com/google/uuid"
)

// jobTurns lets one call per job at a time through to the database. A
// manual fire locks its job's rows until it commits, so concurrent fires
// of one job run one after the other anyway; waiting for their turn here,
// they hold no pool connection while they wait. Otherwise a burst of
// fires of one job filled the replica's pool with connections waiting on
// that job's lock, and every other request of the replica (other jobs,
// agents' heartbeats) waited behind them for a connection: under load,
// long enough for agents to miss their heartbeats and be taken offline.
type jobTurns struct {
	mu   sync.Mutex
	jobs map[uuid.UUID]*jobTurn
}

type jobTurn struct {
	held  chan struct{} // holds a value while a call has the turn
	calls int           // calls that have the turn or wait for it
}

// take waits for job's turn, or for ctx to end; release gives the turn to
// the next call.
func (t *jobTurns) take(ctx context.Context, job uuid.UUID) (release func(), err error) {
	t.mu.Lock()
	if t.jobs == nil {
		t.jobs = map[uuid.UUID]*jobTurn{}
	}
	turn := t.jobs[job]
	if turn == nil {
		turn = &jobTurn{held: make(chan struct{}, 1)}
		t.jobs[job] = turn
	}
	turn.calls++
	t.mu.Unlock()
	select {
	case turn.held <- struct{}{}:
		return func() { <-turn.held; t.leave(job, turn) }, nil
	case <-ctx.Done():
		t.leave(job, turn)
		return nil, ctx.Err()
	}
}

// leave forgets a job nobody calls for any more: the map holds only the
// jobs of calls in flight.
func (t *jobTurns) leave(job uuid.UUID, turn *jobTurn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if turn.calls--; turn.calls == 0 {
		delete(t.jobs, job)
	}
}
