package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
)

// ErrAgentNotActive means an agent asked for work while draining or
// quarantined.
var ErrAgentNotActive = errors.New("agent is not active")

// AgentConfig tunes the agent protocol.
type AgentConfig struct {
	// Lease is how long a lease lasts without a heartbeat. Defaults to 30 s.
	Lease time.Duration
	// HeartbeatInterval is how often agents heartbeat; one silent for 3
	// intervals is offline. Defaults to 5 s.
	HeartbeatInterval time.Duration
	// StealAfter is how long a task routed to one agent waits before
	// another may take it, so a dead or busy agent never stalls work.
	// Defaults to 2 s.
	StealAfter time.Duration
	// ProbeEvery is how often a quarantined agent is given one task to
	// prove itself. Defaults to 5 s.
	ProbeEvery time.Duration
	// RecordWindow is how far back GET /v1/agents counts each agent's
	// outcomes. Defaults to 10 minutes.
	RecordWindow time.Duration
	// StarveAfter is how long a ready task may wait before it is leased
	// ahead of higher priorities, so low-priority work is delayed, never
	// starved. Defaults to 5 minutes.
	StarveAfter time.Duration
	// MaxTaskLogBytes caps the output stored per task (every attempt
	// counted): the chunk that crosses it is cut, later output is dropped,
	// and one event on stream "ax" says so. Defaults to 1 MiB.
	MaxTaskLogBytes int64
	// IdleRecheck is how long a waiting long poll sleeps at most between
	// checks when no task it could take is due: notifications (new or
	// retried tasks, job and class changes) and the computed time of the
	// next leasable task (backoff, steal delay, class token) wake it
	// sooner, and the notifier wakes every waiter when its connection
	// comes back (it may have missed some); this only bounds the wait
	// while that connection is down. Defaults to 25 s, the longest wait a
	// lease may ask for: a check every 5 s was an idle agent's second
	// statement per heartbeat (BenchmarkIdleCost).
	IdleRecheck time.Duration
	// LoadSmoothing is how long a heartbeat's load sample keeps weighing on
	// the agent's smoothed load, which routing reads (load_aware): the
	// time constant of an exponential moving average of the busiest of
	// running/capacity, CPU and memory use, so one busy minute does not
	// move an agent's keys and a lasting one does. Defaults to 3 minutes.
	LoadSmoothing time.Duration
}

func (c AgentConfig) withDefaults() AgentConfig {
	c.Lease = cmp.Or(c.Lease, 30*time.Second)
	c.HeartbeatInterval = cmp.Or(c.HeartbeatInterval, 5*time.Second)
	c.StealAfter = cmp.Or(c.StealAfter, 2*time.Second)
	c.ProbeEvery = cmp.Or(c.ProbeEvery, 5*time.Second)
	c.RecordWindow = cmp.Or(c.RecordWindow, 10*time.Minute)
	c.StarveAfter = cmp.Or(c.StarveAfter, 5*time.Minute)
	c.MaxTaskLogBytes = cmp.Or(c.MaxTaskLogBytes, DefaultMaxTaskLogBytes)
	c.IdleRecheck = cmp.Or(c.IdleRecheck, 25*time.Second)
	c.LoadSmoothing = cmp.Or(c.LoadSmoothing, axtype.DefaultLoadSmoothing)
	return c
}

// DefaultMaxTaskLogBytes is AgentConfig.MaxTaskLogBytes's default.
const DefaultMaxTaskLogBytes = 1 << 20

// LeaseBroker is the server side of the agent protocol: registration,
// long-poll leasing, heartbeats, results, logs and releases. Leasing waits
// on the replica's one LISTEN connection (notify.Notifier), never on a
// connection per waiting agent.
type LeaseBroker struct {
	pool     *pgxpool.Pool
	notifier *notify.Notifier
	cfg      AgentConfig
	logger   *slog.Logger
	metrics  *metrics.Metrics
	outbox   *delivery.Outbox                                  // enqueues callbacks of executions results end; nil: none
	clock    *clock.Clock                                      // nil: the database's now()
	classes  *RateClasses                                      // admission: tokens before a lease
	outlooks *readTogether[*axtype.LeaseOutlook]               // the waiting polls' checks, read together
	agents   *readTogether[*axtype.Agent]                      // the agent rows calls start with, read together
	leases   *batches[axtype.LeaseAgent, []*axtype.LeasedTask] // the due polls' leases, taken together
	results  *batches[agentResults, []axtype.CompletedTask]    // the agents' results, recorded together
	// keyFreed has a value after a concurrency key freed a place (nil
	// without a notifier: every lease unparks); unparkMore says a lease
	// must unpark (the last left records, or a poll's check saw some).
	keyFreed   <-chan struct{}
	unparkMore atomic.Bool
}

// maxLostLogged is how many lost leases of one heartbeat are logged one
// by one; the rest are counted in one line.
const maxLostLogged = 10

// NewLeaseBroker returns an LeaseBroker; notifier may be nil (leases then
// poll every 250 ms while waiting), logger and metrics too.
func NewLeaseBroker(pool *pgxpool.Pool, notifier *notify.Notifier, cfg AgentConfig, logger *slog.Logger, m *metrics.Metrics) *LeaseBroker {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = metrics.New(nil)
	}
	s := &LeaseBroker{pool: pool, notifier: notifier, cfg: cfg.withDefaults(), logger: logger, metrics: m,
		classes: NewRateClasses(pool, logger)}
	s.outlooks = &readTogether[*axtype.LeaseOutlook]{read: func(ctx context.Context, agentIDs []uuid.UUID) (map[uuid.UUID]*axtype.LeaseOutlook, error) {
		// With a generic plan, as a small lease's statements: left to
		// Postgres, the check was planned afresh every time, 1.0-1.7 ms
		// of planning to 0.15 ms of reading a small queue (each pool's
		// lateral is a read by key whatever the plan).
		return db.WithBatchTxV(ctx, s.pool, 1, func(tx pgx.Tx) (map[uuid.UUID]*axtype.LeaseOutlook, error) {
			return db.TaskNextLeasable(ctx, tx, agentIDs, s.cfg.StealAfter, s.clock.Now())
		})
	}}
	s.agents = &readTogether[*axtype.Agent]{read: func(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*axtype.Agent, error) {
		return db.AgentGetMany(ctx, s.pool, ids)
	}}
	if notifier != nil {
		s.keyFreed, _ = notifier.Subscribe(notify.KeyFreedChannel) // for the broker's life
		// A task-ready notification names the agents its tasks are
		// routed to (ReadyFor): the others' polls look when those tasks
		// may be stolen.
		notifier.Target(notify.TaskReadyChannel, s.cfg.StealAfter)
	}
	s.leases = &batches[axtype.LeaseAgent, []*axtype.LeasedTask]{run: s.serveLeases, pace: batchPace}
	s.results = &batches[agentResults, []axtype.CompletedTask]{run: s.serveResults, split: oneReportPerTask,
		pace: batchPace}
	return s
}

// Config returns the protocol settings agents are told at registration.
func (s *LeaseBroker) Config() AgentConfig { return s.cfg }

// Register stores an agent bound to the API key it will use.
func (s *LeaseBroker) Register(ctx context.Context, a *axtype.Agent) (*axtype.Agent, error) {
	if a.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("error generating agent id: %w", err)
		}
		a.ID = id
	}
	agent, err := db.AgentInsert(ctx, s.pool, a)
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "agent registered", "agent_id", agent.ID, "name", agent.Name, "capacity", agent.Capacity,
		"executors", agent.Executors, "state", agent.State)
	s.unparkFor(ctx, agent)
	return agent, nil
}

// unparkFor unparks the tasks parked for want of an agent (no candidate
// when they were written) that a just registered agent can take, at once
// rather than at the reaper's next sweep, which does the rest past the
// bounds of one sweep (and all of it if this fails: the registration
// stands). Live as the router's default: two heartbeats.
func (s *LeaseBroker) unparkFor(ctx context.Context, agent *axtype.Agent) {
	u, err := db.TaskNoAgentUnpark(ctx, s.pool, uuid.Nil, UnparkJobs, UnparkTasks, 2*s.cfg.HeartbeatInterval, s.clock.Now())
	if err == nil && u.Unparked > 0 {
		s.logger.InfoContext(ctx, "tasks an agent can take now unparked", "agent_id", agent.ID, "tasks", u.Unparked)
		err = db.Notify(ctx, s.pool, notify.TaskReadyChannel, "")
	}
	if err != nil && ctx.Err() == nil {
		s.logger.WarnContext(ctx, "tasks parked for want of an agent not unparked at registration; the reaper will",
			"agent_id", agent.ID, "error", err)
	}
}

// Get returns an agent as of a read that began after the call (read
// with the other calls' agents of the moment, see readTogether). Each
// caller gets a copy of its own: a lease poll updates the agent's state
// and readiness as it checks, and calls of one agent share a read.
func (s *LeaseBroker) Get(ctx context.Context, id uuid.UUID) (*axtype.Agent, error) {
	a, err := s.agents.get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("error getting agent %s: %w", id, err)
	}
	own := *a
	return &own, nil
}

// List returns a page of agents with their records over RecordWindow
// (p.Window is ignored).
func (s *LeaseBroker) List(ctx context.Context, p *db.AgentListParams) ([]*axtype.Agent, error) {
	q := *p
	q.Window = s.cfg.RecordWindow
	return db.AgentList(ctx, s.pool, &q)
}

// Lease hands the agent up to limit tasks, waiting up to wait for some to be
// ready. While it waits it costs one short statement per check, and checks
// only when something it could take may have changed: a task-ready
// notification for its agent or for anyone, a job-changed one, the
// computed time the earliest task it could take becomes leasable
// (backoff, steal delay, class token), StealAfter after a task-ready
// notification for other agents (notify.Notifier.Target), or every
// IdleRecheck. Tasks it may not take (other labels, below a class floor,
// pinned elsewhere) never wake it. An agent that is not ready gets
// nothing; a quarantined one gets a single probe task every ProbeEvery.
func (s *LeaseBroker) Lease(ctx context.Context, agent *axtype.Agent, limit int, wait time.Duration) ([]*axtype.LeasedTask, error) {
	if agent.State != axtype.AgentActive && agent.State != axtype.AgentQuarantined {
		return nil, fmt.Errorf("%w: it is %s", ErrAgentNotActive, agent.State)
	}
	var w leaseWaiter
	if s.notifier != nil {
		var stop1, stop2, stop3, stop4 func()
		w.tasks, stop1 = s.notifier.Subscribe(notify.TaskReadyChannel)
		w.mine, stop2 = s.notifier.SubscribeKey(notify.TaskReadyChannel, ReadyKey(agent.ID))
		w.later, stop3 = s.notifier.SubscribeKey(notify.TaskReadyChannel, LaterKey(agent.ID))
		w.jobs, stop4 = s.notifier.Subscribe(notify.JobChangedChannel)
		defer stop1()
		defer stop2()
		defer stop3()
		defer stop4()
	}
	deadline := time.Now().Add(wait)
	misses := 0 // empty leases in a row right after a check said "now"
	for {
		if agent.Ready {
			tasks, err := s.leaseOnce(ctx, agent, limit)
			if err != nil || len(tasks) > 0 {
				s.attachSecrets(ctx, tasks)
				return tasks, err
			}
		}
		due, checked, err := s.waitLeasable(ctx, agent, deadline, &w, misses)
		if err != nil || !due {
			return nil, err
		}
		if checked {
			misses++
		} else {
			misses = 0 // a lease for tasks named, not a check's: no miss
		}
	}
}

// attachSecrets gives the HTTP tasks among tasks their job's signing
// secrets: the agent signs their requests as ax serve does. The tasks are
// leased already; should the read fail, they go without (the agent then
// fails their attempt, "the request cannot be signed", and it is retried).
func (s *LeaseBroker) attachSecrets(ctx context.Context, tasks []*axtype.LeasedTask) {
	var jobs []uuid.UUID
	for _, t := range tasks {
		if t.ExecutorKind == axtype.ExecutorHTTP && !slices.Contains(jobs, t.JobID) {
			jobs = append(jobs, t.JobID)
		}
	}
	if len(jobs) == 0 {
		return
	}
	secrets, err := db.JobSecretGetMany(ctx, s.pool, jobs)
	if err != nil {
		s.logger.ErrorContext(ctx, "http tasks leased without their signing secrets", "jobs", len(jobs), "error", err)
		return
	}
	for _, t := range tasks {
		t.Secrets = secrets[t.JobID]
	}
}

// leaseWaiter holds the notifications a waiting long poll wakes on (nil
// channels without a notifier: it then wakes on its timers only): new
// tasks for anyone (tasks), new tasks routed to its agent that it may
// lease now (mine) or later (later), and job changes.
type leaseWaiter struct {
	tasks, mine, later, jobs <-chan struct{}
}

// sleep waits d, or less when woken; mine says a notification named its
// agent for tasks it may lease now.
func (w *leaseWaiter) sleep(ctx context.Context, d time.Duration) (mine bool) {
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-w.tasks:
	case <-w.mine:
		return true
	case <-w.later:
	case <-w.jobs:
	}
	return false
}

// waitLeasable sleeps until agent could lease a task (true), or until
// deadline, the context's end or the agent's leaving the active states
// (false); checked says a check found the task (not a notification that
// named the agent). It updates agent's state and readiness as it checks.
// misses counts leases that found nothing right after a check said one
// was due (another agent was faster, or a cap held it back): the first
// retry is at once, later ones back off, so a disagreement never spins.
func (s *LeaseBroker) waitLeasable(ctx context.Context, agent *axtype.Agent, deadline time.Time, w *leaseWaiter, misses int) (due, checked bool, _ error) {
	if misses > 0 {
		w.sleep(ctx, min(time.Millisecond<<min(misses, 10), s.cfg.IdleRecheck, time.Until(deadline)))
	}
	for {
		if time.Until(deadline) <= 0 || ctx.Err() != nil {
			return false, false, nil
		}
		s.metrics.LeaseChecks.Inc()
		o, err := s.outlooks.get(ctx, agent.ID)
		if errors.Is(err, axtype.ErrNotFound) {
			return false, false, nil // gone while waiting
		}
		if err != nil {
			return false, false, err
		}
		agent.State, agent.Ready = o.State, o.Ready
		next := o.Next
		if o.KeysFreed && agent.Ready {
			// Places freed that no lease has unparked into: the next
			// lease does, whatever notifications said.
			s.unparkMore.Store(true)
			next = 0
		}
		switch {
		case agent.State != axtype.AgentActive && agent.State != axtype.AgentQuarantined:
			return false, false, nil // drained or offline while waiting
		case !agent.Ready:
			next = time.Second // readiness comes with a heartbeat, which does not notify
		case agent.State == axtype.AgentQuarantined:
			// Its probe turn (leaseProbe) comes every ProbeEvery at most.
			w.sleep(ctx, min(s.cfg.ProbeEvery, time.Until(deadline)))
			return time.Until(deadline) > 0 && ctx.Err() == nil, true, nil
		}
		if next <= 0 {
			return true, true, nil
		}
		if w.sleep(ctx, min(next, s.cfg.IdleRecheck, time.Until(deadline))) && agent.Ready {
			// Tasks it may lease now were routed to this agent, ready and
			// active when it checked: it leases without a check first (a
			// check cost a lease about 9 of its 24 ms at the median in
			// BenchmarkManyAgents' paced shape, one instrumented run at an
			// eighth of the load). Should they be gone, the lease finds
			// nothing and the poll checks at once.
			return time.Until(deadline) > 0 && ctx.Err() == nil, false, nil
		}
	}
}

// leaseOnce tries one lease for agent: in the next coalesced batch
// (batches), or its probe turn when it is quarantined.
func (s *LeaseBroker) leaseOnce(ctx context.Context, agent *axtype.Agent, limit int) ([]*axtype.LeasedTask, error) {
	if agent.State == axtype.AgentQuarantined {
		tasks, err := s.leaseProbe(ctx, agent)
		if err != nil || len(tasks) == 0 {
			return nil, err
		}
		s.logLeases(ctx, agent, tasks)
		return tasks, nil
	}
	tasks, err := s.leases.do(ctx, leaseAgent(agent, limit))
	if err != nil {
		if len(tasks) > 0 { // leased as the poll ended: hand them back at once
			s.handBack(ctx, agent, tasks)
		}
		if ctx.Err() == nil {
			s.metrics.DispatchFailures.Inc()
		}
		return nil, err
	}
	s.logLeases(ctx, agent, tasks)
	return tasks, nil
}

// handBack releases tasks leased for a poll that ended before it could
// answer, so that they wait for no lease to expire.
func (s *LeaseBroker) handBack(ctx context.Context, agent *axtype.Agent, tasks []*axtype.LeasedTask) {
	refs := make([]axtype.TaskRef, len(tasks))
	for i, t := range tasks {
		refs[i] = axtype.TaskRef{ID: t.ID, Token: t.LeaseToken}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
	defer cancel()
	if _, err := s.Release(ctx, agent.ID, refs); err != nil {
		s.logger.ErrorContext(ctx, "tasks leased for a poll that had ended could not be handed back: they run after their lease expires",
			"agent_id", agent.ID, "tasks", len(tasks), "error", err)
	}
}

// leaseAgent asks for up to limit tasks agent may run: of its labels
// and executor kinds (and targeted, when its key bound its labels).
func leaseAgent(agent *axtype.Agent, limit int) axtype.LeaseAgent {
	return axtype.LeaseAgent{ID: agent.ID, Labels: agent.Labels, Executors: agent.Executors,
		LabelBound: agent.LabelBound, Max: limit}
}

// leaseBatch is a batch of asks under the broker's settings.
func (s *LeaseBroker) leaseBatch(asks ...axtype.LeaseAgent) *LeaseBatch {
	return &LeaseBatch{Agents: asks, Lease: s.cfg.Lease, StealAfter: s.cfg.StealAfter,
		StarveAfter: s.cfg.StarveAfter, Now: s.clock.Now()}
}

// serveLeases leases for a coalesced batch of asks and answers each.
//
// It is small when it leased a few tasks and left slots free: tasks came
// slower than the agents could take them, and the next lease may wait a
// little for company (batches.pace). A lease that filled every ask (a
// backlog) is not: its agents' slots would wait.
func (s *LeaseBroker) serveLeases(ctx context.Context, asks []*batchAsk[axtype.LeaseAgent, []*axtype.LeasedTask]) (small bool) {
	batch := s.leaseBatch()
	for _, a := range asks {
		batch.Agents = append(batch.Agents, a.q)
	}
	got, err := s.lease(ctx, s.pool, batch)
	leased, short := 0, false
	for i, a := range asks {
		if err != nil {
			a.answer(nil, err)
		} else {
			a.answer(got[i], nil)
			leased += len(got[i])
			short = short || len(got[i]) < a.q.Max
		}
	}
	return leased > 0 && leased < batchSmall && short
}

// lease takes tokens of the rate classes that have tasks waiting (see
// RateClasses.admit), leases with e within those grants, and gives back
// the tokens it did not use.
func (s *LeaseBroker) lease(ctx context.Context, e db.TxBeginner, batch *LeaseBatch) ([][]*axtype.LeasedTask, error) {
	total := 0
	for _, a := range batch.Agents {
		total += a.Max
	}
	grants, err := s.classes.admit(ctx, total)
	if err != nil {
		return nil, err
	}
	batch.Grants = grants
	s.unpark(ctx)
	batch.SkipUnpark = true
	got, err := LeaseMany(ctx, e, batch)
	s.classes.giveBack(ctx, grants, slices.Concat(got...))
	return got, err
}

// unpark unparks the keyed tasks that freed places have room for, in a
// transaction of its own (db.TaskConcurrencyUnpark), before a lease that
// may take them: when a key freed a place since the last time (its
// notification, while notifications arrive), the last unpark left
// records, or a poll's check saw records (TaskNextLeasable: this also
// covers a notification lost). A lease of a replica whose keys freed
// nothing costs no round trip more; while notifications are lost (polled:
// every subscriber is woken every poll) only the checks count. A failure
// is logged, not the lease's: the records stay for the next.
func (s *LeaseBroker) unpark(ctx context.Context) {
	due := s.keyFreed == nil || s.unparkMore.Swap(false)
	select {
	case <-s.keyFreed:
		due = due || s.notifier.Degraded() == ""
	default:
	}
	if !due {
		return
	}
	n, err := db.TaskConcurrencyUnpark(ctx, s.pool, s.clock.Now())
	if err != nil {
		s.unparkMore.Store(true)
		if ctx.Err() == nil {
			s.logger.WarnContext(ctx, "unparking keyed tasks failed; the next lease tries again", "error", err)
		}
		return
	}
	if n >= db.ConcurrencyUnparkKeys {
		s.unparkMore.Store(true)
	}
}

// errNoProbeTask rolls a probe back when no task was there to take.
var errNoProbeTask = errors.New("no task for the probe")

// leaseProbe gives a quarantined agent one task when its probe turn has
// come. The turn is used up only when a task was leased (both in one
// transaction), so a healthy agent winning the task does not make the
// quarantined one wait another ProbeEvery.
func (s *LeaseBroker) leaseProbe(ctx context.Context, agent *axtype.Agent) ([]*axtype.LeasedTask, error) {
	tasks, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) ([]*axtype.LeasedTask, error) {
		due, err := db.AgentTakeProbe(ctx, tx, agent.ID, s.cfg.ProbeEvery)
		if err != nil || !due {
			return nil, err
		}
		got, err := s.lease(ctx, tx, s.leaseBatch(leaseAgent(agent, 1)))
		if err != nil {
			return nil, err
		}
		if len(got[0]) == 0 {
			return nil, errNoProbeTask
		}
		return got[0], nil
	})
	if errors.Is(err, errNoProbeTask) {
		return nil, nil
	}
	return tasks, err
}

func (s *LeaseBroker) logLeases(ctx context.Context, agent *axtype.Agent, tasks []*axtype.LeasedTask) {
	id := agent.ID.String()
	for _, t := range tasks {
		how := "routed"
		if !t.RoutedHere {
			how = "taken_over"
		}
		s.metrics.AgentLeases.WithLabelValues(id, how).Inc()
		s.metrics.Dispatched.WithLabelValues(cmp.Or(t.RateClass, "none")).Inc()
		s.metrics.PickupLatency.Observe(t.Waited.Seconds())
		s.logger.DebugContext(ctx, "task leased", "agent_id", agent.ID, "task_id", t.ID,
			"execution_id", t.ExecutionID, "shard", t.ShardIndex, "attempt", t.Attempt, "how", how)
	}
}

// HeartbeatResult tells an agent which of its leases survive.
type HeartbeatResult struct {
	Renewed, Lost, Cancel []uuid.UUID
	LeaseExpiresAt        time.Time
	State                 string
}

// Heartbeat renews every lease the agent lists (and still holds), records
// its load, and says which tasks are lost or must stop.
func (s *LeaseBroker) Heartbeat(ctx context.Context, agentID uuid.UUID, refs []axtype.TaskRef, load *axtype.AgentLoad) (*HeartbeatResult, error) {
	res := &HeartbeatResult{LeaseExpiresAt: time.Now().Add(s.cfg.Lease)}
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		smoothed := *load
		smoothed.Smoothing = s.cfg.LoadSmoothing
		if res.State, err = db.AgentHeartbeat(ctx, tx, agentID, &smoothed, s.clock.Now()); err != nil {
			return err
		}
		renewed, err := db.TaskRenew(ctx, tx, agentID, refs, s.cfg.Lease, s.clock.Now())
		if err != nil {
			return err
		}
		held := make(map[uuid.UUID]bool, len(renewed))
		for _, r := range renewed {
			held[r.ID] = true
			res.Renewed = append(res.Renewed, r.ID)
			res.LeaseExpiresAt = r.LeaseExpiresAt
			if r.Cancel {
				res.Cancel = append(res.Cancel, r.ID)
			}
		}
		for _, r := range refs {
			if !held[r.ID] {
				res.Lost = append(res.Lost, r.ID)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, id := range res.Lost {
		if i == maxLostLogged {
			// A heartbeat may name 10,000 tasks: one line each was 2 MB of
			// log a call, written while every request of the replica waits
			// on the same handler.
			s.logger.InfoContext(ctx, "leases lost", "agent_id", agentID, "more", len(res.Lost)-maxLostLogged)
			break
		}
		s.logger.InfoContext(ctx, "lease lost", "agent_id", agentID, "task_id", id)
	}
	return res, nil
}

// Complete records results; those with a stale token, or of tasks whose
// lease agentID does not hold, are left out of the returned list and
// changed nothing. An HTTP task reported as ResultAccepted (its target
// answered 202) is handed to its target and returned as running. Results
// that agents report at the same time are recorded together (batches).
func (s *LeaseBroker) Complete(ctx context.Context, agentID uuid.UUID, results []axtype.TaskResult) ([]axtype.CompletedTask, error) {
	done, err := s.results.do(ctx, agentResults{agentID: agentID, results: results})
	if err != nil && len(done) == 0 {
		return nil, err
	}
	// Results recorded as the call ended (err) are counted and woken for
	// all the same: they are committed, whoever hears of it.
	s.wakeAfterResults(done)
	for _, d := range done {
		switch d.State {
		case axtype.TaskRunning: // no result yet
			s.logger.InfoContext(ctx, "http task handed to its target (202): its result is awaited", "agent_id", agentID,
				"task_id", d.ID, "execution_id", d.ExecutionID)
			continue
		case axtype.TaskPending:
			// The attempt failed and the task waits for its next one: not
			// a completion. The run's end is logged once, when it ends.
			s.metrics.Retries.Inc()
			s.logger.InfoContext(ctx, "task attempt failed: retrying", "agent_id", agentID, "task_id", d.ID,
				"execution_id", d.ExecutionID, "error_code", d.ErrorCode)
			continue
		default:
			s.metrics.TaskResults.Inc(string(d.State), d.ErrorCode)
		}
		// Each task's end is at debug: the run's end is logged at info
		// (RunLogger), once per run however many shards it has.
		s.logger.DebugContext(ctx, "task completed", "agent_id", agentID, "task_id", d.ID,
			"execution_id", d.ExecutionID, "state", d.State, "error_code", d.ErrorCode)
	}
	return done, err
}

// wakeAfterResults wakes this replica's waiters on the executions the
// results ended, and its lease polls when a failed attempt made a task
// pending again, while notifications are lost (they would otherwise wait
// for the next poll); nothing while notifications arrive.
func (s *LeaseBroker) wakeAfterResults(done []axtype.CompletedTask) {
	var ended []string
	retried := false
	for _, d := range done {
		if d.Finalized {
			ended = append(ended, d.ExecutionID.String())
		}
		retried = retried || d.State == axtype.TaskPending
	}
	if len(ended) > 0 {
		s.notifier.AfterCommit(notify.ExecutionEndedChannel, ended...)
	}
	if retried {
		s.notifier.AfterCommit(notify.TaskReadyChannel)
	}
}

// agentResults are one Complete call's results.
type agentResults struct {
	agentID uuid.UUID
	results []axtype.TaskResult
}

// oneReportPerTask leaves for a later batch the calls that report a task
// an earlier call of the batch reports too: of a task's results in one
// statement only the first is read, and it could be the one of an agent
// that no longer holds the lease.
func oneReportPerTask(waiting []*batchAsk[agentResults, []axtype.CompletedTask]) (now, later []*batchAsk[agentResults, []axtype.CompletedTask]) {
	reported := map[uuid.UUID]bool{}
	for _, a := range waiting {
		if slices.ContainsFunc(a.q.results, func(r axtype.TaskResult) bool { return reported[r.ID] }) {
			later = append(later, a)
			continue
		}
		for _, r := range a.q.results {
			reported[r.ID] = true
		}
		now = append(now, a)
	}
	return now, later
}

// serveResults records a coalesced batch of calls' results and answers
// each. Should the batch fail, each call is recorded alone: one agent's
// results that the database refuses must not fail the others'.
//
// It is small when it recorded fewer than batchSmall results: the next
// may wait a little for company (batches.pace). A result waiting holds
// no slot (an agent counts only the tasks it executes), only the time at
// which its run is seen to end.
func (s *LeaseBroker) serveResults(ctx context.Context, asks []*batchAsk[agentResults, []axtype.CompletedTask]) (small bool) {
	calls := make([]agentResults, len(asks))
	for i, a := range asks {
		calls[i] = a.q
	}
	recorded := 0
	done, err := s.record(ctx, calls)
	if err != nil && len(asks) > 1 {
		for _, a := range asks {
			one, err := s.recordAlone(a.q)
			if err != nil {
				a.answer(nil, err)
			} else {
				a.answer(one, nil)
				recorded += len(one)
			}
		}
		return recorded > 0 && recorded < batchSmall
	}
	for i, a := range asks {
		if err != nil {
			a.answer(nil, err)
		} else {
			a.answer(done[i], nil)
			recorded += len(done[i])
		}
	}
	return recorded > 0 && recorded < batchSmall
}

// recordAlone records one call's results after its batch failed, in a
// time of its own: the batch's may be what ran out (a statement one call
// made slow), and every call retried within it then failed at once.
func (s *LeaseBroker) recordAlone(call agentResults) ([]axtype.CompletedTask, error) {
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	defer cancel()
	done, err := s.record(ctx, []agentResults{call})
	if err != nil {
		return nil, err
	}
	return done[0], nil
}

// record records the results of calls in one transaction; out[i] are
// what calls[i] changed.
func (s *LeaseBroker) record(ctx context.Context, calls []agentResults) ([][]axtype.CompletedTask, error) {
	size := 0
	for _, c := range calls {
		size += len(c.results)
	}
	return db.WithBatchTxV(ctx, s.pool, size, func(tx pgx.Tx) ([][]axtype.CompletedTask, error) {
		out := make([][]axtype.CompletedTask, len(calls))
		var agents []uuid.UUID
		var results []axtype.TaskResult
		caller := map[uuid.UUID]int{}
		for i, c := range calls {
			accepted, rest := splitAccepted(c.results)
			handed, err := s.awaitTargets(ctx, tx, c.agentID, accepted)
			if err != nil {
				return nil, err
			}
			out[i] = handed
			for _, r := range rest {
				agents = append(agents, c.agentID)
				results = append(results, r)
				caller[r.ID] = i
			}
		}
		retried := false
		if len(results) > 0 {
			done, err := db.TaskCompleteByAgents(ctx, tx, agents, results, s.clock.Now())
			if err != nil {
				return nil, err
			}
			for _, d := range done {
				out[caller[d.ID]] = append(out[caller[d.ID]], d)
				retried = retried || d.State == axtype.TaskPending
			}
			// Callbacks are due only for executions this call ended (the
			// periodic flush catches anything else).
			if slices.ContainsFunc(done, func(d axtype.CompletedTask) bool { return d.Finalized }) {
				if err := s.outbox.Flush(ctx, tx); err != nil {
					return nil, err
				}
			}
		}
		if retried {
			return out, db.Notify(ctx, tx, notify.TaskReadyChannel, "")
		}
		return out, nil
	})
}

// ResultAccepted is the state an agent reports for an HTTP task whose
// target answered 202: the task is not over, its target posts the result
// to the completion URL (db.TaskAwaitTarget).
const ResultAccepted axtype.TaskState = "accepted"

// splitAccepted separates the 202s from the results proper.
func splitAccepted(all []axtype.TaskResult) (accepted []axtype.TaskRef, results []axtype.TaskResult) {
	for _, r := range all {
		if r.State == ResultAccepted {
			accepted = append(accepted, r.TaskRef)
		} else {
			results = append(results, r)
		}
	}
	return accepted, results
}

// awaitTargets hands the tasks whose targets answered 202 to them; they
// come back as running. The agent's lease grace (a lease's length) is
// how long after the deadline the reaper waits before it times them out.
func (s *LeaseBroker) awaitTargets(ctx context.Context, tx pgx.Tx, agentID uuid.UUID, refs []axtype.TaskRef) ([]axtype.CompletedTask, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	return db.TaskAwaitTarget(ctx, tx, agentID, refs, s.cfg.Lease)
}

// Logs stores log chunks of current leases held by agentID and returns
// how many of the tasks matched (0: no lease was current and the caller's).
func (s *LeaseBroker) Logs(ctx context.Context, agentID uuid.UUID, chunks []axtype.LogChunk) (int, error) {
	return db.TaskLogAppend(ctx, s.pool, &db.TaskLogAppendParams{AgentID: agentID, Chunks: chunks, MaxBytes: s.cfg.MaxTaskLogBytes,
		Marker: fmt.Sprintf("output truncated: this task's log reached the server's cap of %d bytes; the rest was dropped",
			s.cfg.MaxTaskLogBytes)})
}

// DrainHold drains an agent on an operator's word: the drain holds across
// deregistration and registering again, until Resume.
func (s *LeaseBroker) DrainHold(ctx context.Context, agentID uuid.UUID) error {
	if err := db.AgentDrainHold(ctx, s.pool, agentID); err != nil {
		return err
	}
	s.logger.InfoContext(ctx, "agent drained by an operator", "agent_id", agentID)
	return nil
}

// Resume lifts an operator's drain and a quarantine.
func (s *LeaseBroker) Resume(ctx context.Context, agentID uuid.UUID) error {
	if err := db.AgentResume(ctx, s.pool, agentID); err != nil {
		return err
	}
	s.logger.InfoContext(ctx, "agent resumed by an operator", "agent_id", agentID)
	return nil
}

// Release hands leases back so other agents take the tasks at once.
func (s *LeaseBroker) Release(ctx context.Context, agentID uuid.UUID, refs []axtype.TaskRef) ([]uuid.UUID, error) {
	return db.WithTxV(ctx, s.pool, func(tx pgx.Tx) ([]uuid.UUID, error) {
		released, err := db.TaskRelease(ctx, tx, agentID, refs)
		if err != nil {
			return nil, err
		}
		if err := s.endCancelled(ctx, tx, agentID, refs, len(released)); err != nil {
			return nil, err
		}
		if len(released) == 0 {
			return released, nil
		}
		return released, db.Notify(ctx, tx, notify.TaskReadyChannel, "")
	})
}

// endCancelled ends as cancelled the tasks of refs that Release kept
// because their run was cancelled: no other agent may start them. The
// released ones no longer hold their token, so they match nothing here.
func (s *LeaseBroker) endCancelled(ctx context.Context, tx pgx.Tx, agentID uuid.UUID, refs []axtype.TaskRef, released int) error {
	if released == len(refs) {
		return nil
	}
	results := make([]axtype.TaskResult, len(refs))
	for i, ref := range refs {
		results[i] = axtype.TaskResult{TaskRef: ref, State: axtype.TaskCancelled, Error: "released by its agent after the run was cancelled"}
	}
	done, err := db.TaskCompleteByAgent(ctx, tx, agentID, results, s.clock.Now())
	if err != nil || !slices.ContainsFunc(done, func(d axtype.CompletedTask) bool { return d.Finalized }) {
		return err
	}
	return s.outbox.Flush(ctx, tx)
}

// SetState drains or reactivates an agent, or marks it offline when it
// deregisters.
func (s *LeaseBroker) SetState(ctx context.Context, agentID uuid.UUID, state axtype.AgentState) error {
	if err := db.AgentSetState(ctx, s.pool, agentID, state); err != nil {
		return err
	}
	s.logger.InfoContext(ctx, "agent state changed", "agent_id", agentID, "state", state)
	return nil
}

// WithOutbox makes the service enqueue callbacks when results end
// executions; it returns s.
func (s *LeaseBroker) WithOutbox(o *delivery.Outbox) *LeaseBroker {
	s.outbox = o
	return s
}

// WithClock makes the broker lease, renew and wait by c instead of the
// database's now() (tests that move time forward); it returns s.
func (s *LeaseBroker) WithClock(c *clock.Clock) *LeaseBroker {
	s.clock = c
	return s
}
