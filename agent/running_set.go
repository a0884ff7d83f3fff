package agent

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Why a task's context was cancelled, read back with context.Cause.
var (
	errLeaseLost         = errors.New("lease lost")
	errLeaseExpired      = errors.New("lease expired without renewal")
	errCancelledByServer = errors.New("cancelled by the server")
	errTimedOut          = errors.New("timed out")
	errDrained           = errors.New("agent drained before the task finished")
)

// taskState is where a held task is in its life on this agent.
type taskState int

const (
	taskRunning  taskState = iota // executing
	taskFinished                  // executed; its result waits to be reported
	taskLost                      // lease gone: stop, never report
	taskReleased                  // handed back while draining: never report
)

// heldTask is one task whose lease the agent holds or held.
type heldTask struct {
	task      LeasedTask
	state     taskState
	cancel    context.CancelCauseFunc
	cancelled bool      // a cancel was already requested
	draining  bool      // the drain stopped it: handed back unless it succeeds all the same
	deadline  time.Time // end of the lease unless renewed, on the agent's clock
	result    TaskResult
	sending   bool // the result is in a request on its way
	// lostInFlight: the lease was lost while the result was being sent.
	// The server's answer to that request says whether it was recorded
	// (a heartbeat crossing a report finds the lease ended by the result
	// itself), so the result is not dropped then; it is never sent again.
	lostInFlight bool
}

// runningSet is the agent's record of its leases, keyed by task id: tasks
// executing and tasks whose result is not reported yet. It is the one place
// that decides whether a result may be reported, so that a task whose lease
// was lost, expired or handed back is never reported, whatever order
// heartbeats, completions and drain happen in.
type runningSet struct {
	now         func() time.Time
	slotFreed   chan struct{} // signalled when a task stops executing
	resultReady chan struct{} // signalled when a result waits

	mu        sync.Mutex
	tasks     map[string]*heldTask
	executing int
}

// newRunningSet returns an empty set that signals slotFreed whenever a task
// stops executing.
func newRunningSet(now func() time.Time, slotFreed chan struct{}) *runningSet {
	return &runningSet{now: now, tasks: map[string]*heldTask{},
		slotFreed: slotFreed, resultReady: make(chan struct{}, 1)}
}

// add records a task that starts executing.
func (s *runningSet) add(t LeasedTask, cancel context.CancelCauseFunc, deadline time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tasks[t.TaskID] = &heldTask{task: t, cancel: cancel, deadline: deadline}
	s.executing++
}

// executingCount is how many tasks execute now: what capacity counts.
func (s *runningSet) executingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executing
}

// refs lists every lease the agent still holds, executing or waiting to be
// reported: a heartbeat renews them all.
func (s *runningSet) refs() []TaskRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]TaskRef, 0, len(s.tasks))
	for _, h := range s.tasks {
		if h.state == taskRunning || h.state == taskFinished {
			refs = append(refs, h.task.Ref())
		}
	}
	return refs
}

// renew moves the deadline of the renewed leases to until.
func (s *runningSet) renew(ids []string, until time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if h, ok := s.tasks[id]; ok && until.After(h.deadline) {
			h.deadline = until
		}
	}
}

// lose drops the leases of ids: executing tasks are cancelled with cause,
// waiting results are discarded. It returns the tasks it affected.
func (s *runningSet) lose(ids []string, cause error) []LeasedTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	var lost []LeasedTask
	for _, id := range ids {
		if h, ok := s.tasks[id]; ok && s.loseLocked(h, cause) {
			lost = append(lost, h.task)
		}
	}
	return lost
}

func (s *runningSet) loseLocked(h *heldTask, cause error) bool {
	switch h.state {
	case taskRunning:
		h.state = taskLost
		h.cancel(cause)
		return true
	case taskFinished:
		if h.sending {
			h.lostInFlight = true
			return false
		}
		delete(s.tasks, h.task.TaskID)
		return true
	}
	return false
}

// expire loses every lease whose deadline passed: the server has given, or
// will give, those tasks to someone else.
func (s *runningSet) expire() []LeasedTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	var expired []LeasedTask
	for _, h := range s.tasks {
		if now.After(h.deadline) && s.loseLocked(h, errLeaseExpired) {
			expired = append(expired, h.task)
		}
	}
	return expired
}

// cancel stops the executing tasks among ids, which are then reported as
// cancelled. It returns the tasks newly asked to stop.
func (s *runningSet) cancel(ids []string) []LeasedTask {
	s.mu.Lock()
	defer s.mu.Unlock()
	var stopped []LeasedTask
	for _, id := range ids {
		if h, ok := s.tasks[id]; ok && h.state == taskRunning && !h.cancelled {
			h.cancelled = true
			h.cancel(errCancelledByServer)
			stopped = append(stopped, h.task)
		}
	}
	return stopped
}

// stopForDrain cancels every executing task for the drain and returns
// their leases. Each is handed back (handBackStopped) unless it ends with
// success all the same: a handler that finished as the cancel came did
// its work, and handing it back would run it a second time.
func (s *runningSet) stopForDrain() []TaskRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	var refs []TaskRef
	for _, h := range s.tasks {
		if h.state == taskRunning {
			h.draining = true
			h.cancel(errDrained)
			refs = append(refs, h.task.Ref())
		}
	}
	return refs
}

// handBackStopped returns those of refs (from stopForDrain) to hand back:
// the tasks that stopped without success, or still run (they ignored the
// cancel). None of them will be reported.
func (s *runningSet) handBackStopped(refs []TaskRef) []TaskRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TaskRef
	for _, ref := range refs {
		h, ok := s.tasks[ref.TaskID]
		switch {
		case !ok, h.task.LeaseToken != ref.LeaseToken:
			// Lost meanwhile, or released already: nothing to hand back.
		case h.state == taskRunning:
			h.state = taskReleased
			out = append(out, ref)
		case h.state == taskReleased:
			delete(s.tasks, ref.TaskID)
			out = append(out, ref)
		}
	}
	return out
}

// finish records that a task stopped executing with result (which names
// the task and its lease token). It reports
// whether the result will be reported: not when the lease was lost or
// handed back meanwhile.
func (s *runningSet) finish(result TaskResult) bool {
	id := result.TaskID
	s.mu.Lock()
	defer s.mu.Unlock()
	s.executing--
	signal(s.slotFreed)
	h, ok := s.tasks[id]
	if !ok || h.task.LeaseToken != result.LeaseToken {
		return false // forgotten, or leased to this agent again since: not ours to touch
	}
	if h.state != taskRunning {
		delete(s.tasks, id)
		return false
	}
	if h.draining && result.State != StateSucceeded {
		h.state = taskReleased // handed back by handBackStopped
		return false
	}
	h.state, h.result = taskFinished, result
	signal(s.resultReady)
	return true
}

// pendingResults counts results not reported yet.
func (s *runningSet) pendingResults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, h := range s.tasks {
		if h.state == taskFinished {
			n++
		}
	}
	return n
}

// takeResults hands out results nobody is sending yet: up to limit of
// them, and no more than about maxBytes of result and error text, so that
// a batch stays within what the server takes in one request. The first one
// is handed out whatever its size.
func (s *runningSet) takeResults(limit, maxBytes int) []TaskResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []TaskResult
	size := 0
	for _, h := range s.tasks {
		if h.state != taskFinished || h.sending {
			continue
		}
		n := len(h.result.Result) + len(h.result.Error) + 256
		if len(out) == limit || (len(out) > 0 && size+n > maxBytes) {
			break
		}
		h.sending = true
		size += n
		out = append(out, h.result)
	}
	return out
}

// reportable keeps the results that may still be sent: their lease is held
// and has not run out. The others are forgotten and returned: those whose
// lease ran out, and those whose lease a heartbeat found lost while an
// earlier try to send them was out.
func (s *runningSet) reportable(results []TaskResult) (keep []TaskResult, expired, lost []LeasedTask) {
	expired = s.expire()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range results {
		h, ok := s.tasks[r.TaskID]
		switch {
		case !ok || h.state != taskFinished || h.task.LeaseToken != r.LeaseToken:
		case h.lostInFlight: // a stale result is never sent
			delete(s.tasks, r.TaskID)
			if h.deadline.Before(s.now()) {
				expired = append(expired, h.task)
			} else {
				lost = append(lost, h.task)
			}
		default:
			keep = append(keep, r)
		}
	}
	return keep, expired, lost
}

// resolve forgets tasks whose result the server has answered for.
func (s *runningSet) resolve(results []TaskResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range results {
		if h, ok := s.tasks[r.TaskID]; ok && h.state == taskFinished && h.task.LeaseToken == r.LeaseToken {
			delete(s.tasks, r.TaskID)
		}
	}
}

// task returns the task of a held lease.
func (s *runningSet) task(id string) (LeasedTask, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.tasks[id]
	if !ok {
		return LeasedTask{}, false
	}
	return h.task, true
}

// holds reports whether the lease of taskID is still held: its output is
// worth shipping.
func (s *runningSet) holds(taskID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.tasks[taskID]
	return ok && (h.state == taskRunning || h.state == taskFinished)
}

// signal wakes whoever waits on ch without ever blocking the signaller.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
