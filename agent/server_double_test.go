package agent

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// serverDouble is a TEST DOUBLE of Server: an in-memory stand-in for the ax
// server, used only to unit-test the agent's scheduling logic (capacity,
// renewal of every held lease, lost leases, cancels, drain and release,
// retries). It is not the ax server and says nothing about the wire
// protocol or the database: the end-to-end tests run ax-agent against a
// real `ax serve`.
type serverDouble struct {
	mu       sync.Mutex
	arrived  chan struct{} // closed and replaced when tasks are added: wakes waiting leases
	pending  []LeasedTask
	tokens   map[string]string // task id → current lease token
	token    string            // the agent token accepted now
	agents   int
	state    string
	lost     map[string]bool // reported lost on every heartbeat
	cancel   map[string]bool // reported to cancel on every heartbeat
	conflict map[string]bool // results refused as stale
	extra    int             // tasks handed out beyond the max asked for
	hbDelay  time.Duration   // how late heartbeat answers arrive
	failures map[string][]error
	settings Credentials
	// refuse answers this status to every batch holding a result of the
	// task (a bad_result report too when refuseReports).
	refuse        map[string]int
	refuseReports bool

	// What the agent did, in order.
	events        []string
	registrations []Registration
	leases        []LeaseRequest
	heartbeats    []Heartbeat
	completes     [][]TaskResult
	results       []TaskResult
	logs          []LogChunk
	released      []TaskRef
	deregs        int
}

func newServerDouble() *serverDouble {
	return &serverDouble{arrived: make(chan struct{}), tokens: map[string]string{}, state: "active",
		lost: map[string]bool{}, cancel: map[string]bool{}, conflict: map[string]bool{},
		failures: map[string][]error{}, settings: Credentials{LeaseSeconds: 30, HeartbeatIntervalSeconds: 5}}
}

// add queues tasks for leasing.
func (d *serverDouble) add(tasks ...LeasedTask) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pending = append(d.pending, tasks...)
	close(d.arrived)
	d.arrived = make(chan struct{})
}

// failNext makes the next calls of op fail with errs, in order.
func (d *serverDouble) failNext(op string, errs ...error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failures[op] = append(d.failures[op], errs...)
}

// revoke refuses the agent's token from now on, as after a key rotation.
func (d *serverDouble) revoke() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.token = ""
}

func (d *serverDouble) set(fn func(d *serverDouble)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fn(d)
}

// snapshot runs fn with the double locked, for reading what happened.
func (d *serverDouble) snapshot(fn func(d *serverDouble)) { d.set(fn) }

// begin records a call and returns the error injected for it, or refuses
// a stale session. Called with d.mu held.
func (d *serverDouble) begin(op string, s *Session) error {
	d.events = append(d.events, op)
	if errs := d.failures[op]; len(errs) > 0 {
		d.failures[op] = errs[1:]
		return errs[0]
	}
	if s != nil && (d.token == "" || s.Token != d.token) {
		return fmt.Errorf("%s: %w", op, ErrUnauthorized)
	}
	return nil
}

func (d *serverDouble) Register(_ context.Context, key string, reg Registration) (Credentials, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin("register", nil); err != nil {
		return Credentials{}, err
	}
	if key != "bootstrap" {
		return Credentials{}, fmt.Errorf("register: %w", ErrUnauthorized)
	}
	d.agents++
	d.registrations = append(d.registrations, reg)
	d.token = fmt.Sprintf("token-%d", d.agents)
	c := d.settings
	c.AgentID, c.Token = fmt.Sprintf("agent-%d", d.agents), d.token
	return c, nil
}

func (d *serverDouble) Lease(ctx context.Context, s Session, req LeaseRequest) ([]LeasedTask, error) {
	deadline := time.NewTimer(time.Duration(req.WaitSeconds) * time.Second)
	defer deadline.Stop()
	for first := true; ; first = false {
		tasks, arrived, err := d.take(s, req, first)
		if err != nil || len(tasks) > 0 {
			return tasks, err
		}
		select {
		case <-arrived:
		case <-deadline.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func (d *serverDouble) take(s Session, req LeaseRequest, first bool) ([]LeasedTask, <-chan struct{}, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if first {
		if err := d.begin("lease", &s); err != nil {
			return nil, nil, err
		}
		d.leases = append(d.leases, req)
		if req.Max > MaxLeasePerCall { // as the server's validation does
			return nil, nil, &StatusError{Code: 422, Problem: Problem{Detail: "max: must be at most 1000"}}
		}
	}
	if d.state != "active" && d.state != "quarantined" { // the server probes quarantined agents
		return nil, nil, nil
	}
	n := min(len(d.pending), req.Max+d.extra)
	tasks := slices.Clone(d.pending[:n])
	d.pending = d.pending[n:]
	for i := range tasks {
		tasks[i].LeaseToken = fmt.Sprintf("lease-%s-%d", tasks[i].TaskID, len(d.events))
		d.tokens[tasks[i].TaskID] = tasks[i].LeaseToken
	}
	return tasks, d.arrived, nil
}

func (d *serverDouble) Heartbeat(ctx context.Context, s Session, hb Heartbeat) (HeartbeatReply, error) {
	reply, err := d.heartbeat(s, hb)
	d.mu.Lock()
	delay := d.hbDelay
	d.mu.Unlock()
	select { // the leases were renewed already: only the answer is late
	case <-time.After(delay):
		return reply, err
	case <-ctx.Done():
		return HeartbeatReply{}, ctx.Err()
	}
}

func (d *serverDouble) heartbeat(s Session, hb Heartbeat) (HeartbeatReply, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin("heartbeat", &s); err != nil {
		return HeartbeatReply{}, err
	}
	d.heartbeats = append(d.heartbeats, hb)
	reply := HeartbeatReply{State: d.state}
	for _, r := range hb.Tasks {
		switch {
		case d.lost[r.TaskID] || d.tokens[r.TaskID] != r.LeaseToken:
			reply.Lost = append(reply.Lost, r.TaskID)
		case d.cancel[r.TaskID]:
			reply.Renewed = append(reply.Renewed, r.TaskID)
			reply.Cancel = append(reply.Cancel, r.TaskID)
		default:
			reply.Renewed = append(reply.Renewed, r.TaskID)
		}
	}
	return reply, nil
}

func (d *serverDouble) Complete(_ context.Context, s Session, results []TaskResult) ([]ResultOutcome, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin("complete", &s); err != nil {
		return nil, err
	}
	d.completes = append(d.completes, slices.Clone(results))
	for _, r := range results {
		if code := d.refuse[r.TaskID]; code != 0 && (r.ErrorCode != ErrorCodeBadResult || d.refuseReports) {
			return nil, &StatusError{Code: code}
		}
	}
	out := make([]ResultOutcome, len(results))
	for i, r := range results {
		out[i] = ResultOutcome{TaskID: r.TaskID, Status: OutcomeConflict}
		if !d.conflict[r.TaskID] && !d.lost[r.TaskID] && d.tokens[r.TaskID] == r.LeaseToken {
			out[i].Status = OutcomeAccepted
			d.results = append(d.results, r)
			d.events = append(d.events, "result "+r.TaskID)
			delete(d.tokens, r.TaskID)
		}
	}
	return out, nil
}

func (d *serverDouble) Logs(_ context.Context, s Session, chunks []LogChunk) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin("logs", &s); err != nil {
		return err
	}
	for _, c := range chunks {
		if d.tokens[c.TaskID] == c.LeaseToken {
			d.logs = append(d.logs, c)
			d.events = append(d.events, "log "+c.TaskID)
		}
	}
	return nil
}

func (d *serverDouble) Release(_ context.Context, s Session, tasks []TaskRef) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin("release", &s); err != nil {
		return err
	}
	for _, r := range tasks {
		if d.tokens[r.TaskID] == r.LeaseToken {
			d.released = append(d.released, r)
			delete(d.tokens, r.TaskID)
		}
	}
	return nil
}

func (d *serverDouble) Drain(_ context.Context, s Session) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin("drain", &s); err != nil {
		return err
	}
	d.state = "draining"
	return nil
}

func (d *serverDouble) Deregister(_ context.Context, s Session) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.begin("deregister", &s); err != nil {
		return err
	}
	d.deregs++
	return nil
}

// unavailable is what a server behind a load balancer answers while down.
var unavailable = &StatusError{Code: http.StatusServiceUnavailable}

var _ Server = (*serverDouble)(nil)
