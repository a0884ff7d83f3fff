package dispatch

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/routing"
)

// TaskRouterConfig tunes a TaskRouter.
type TaskRouterConfig struct {
	// Live is how recently an agent must have heartbeated to be a
	// candidate. Defaults to 2 heartbeat intervals of AgentConfig.
	Live time.Duration
	// Refresh is how long a snapshot of the candidates is reused. Defaults
	// to 1 s.
	Refresh time.Duration
	// DurationWindow is how far back an agent's successes count toward
	// its average task duration, least_active's tie-break between agents
	// equally busy: the slower one gets the task last. Defaults to 1 hour.
	DurationWindow time.Duration
	// DurationSample bounds the successes averaged per agent (the latest
	// in the window), so reading the candidates costs the same however
	// busy the window was. Defaults to 100.
	DurationSample int
	// Routing tunes the strategies (load threshold, ring slots).
	Routing routing.Config
	// Clock, when set, is the time liveness is judged by (tests that move
	// time forward); nil: the database's now(). Snapshots still age by
	// real time.
	Clock *clock.Clock
}

// TaskRouter places new tasks: by the job's strategy it picks each task's
// preferred agent (and, for keyed strategies, the runner-up that takes it
// over first) among the live, ready agents whose labels match the job's.
// The lease broker honours the choice. Decisions use a snapshot of the
// candidates refreshed at most every Refresh, so routing a batch of fires
// costs one query at most.
type TaskRouter struct {
	cfg     TaskRouterConfig
	router  *routing.Router
	logger  *slog.Logger
	metrics *metrics.Metrics

	mu       sync.Mutex
	snapshot *candidateSnapshot
	rings    map[string]*routing.Ring // by membership
	seq      map[uuid.UUID]uint64     // round-robin counter per job, this replica's
}

// candidateSnapshot is the candidates as read at one time.
type candidateSnapshot struct {
	at     time.Time
	agents []*axtype.Candidate
}

// NewTaskRouter returns a TaskRouter; logger and metrics may be nil.
func NewTaskRouter(agentCfg AgentConfig, cfg TaskRouterConfig, logger *slog.Logger, m *metrics.Metrics) (*TaskRouter, error) {
	cfg.Live = cmp.Or(cfg.Live, 2*agentCfg.withDefaults().HeartbeatInterval)
	cfg.Refresh = cmp.Or(cfg.Refresh, time.Second)
	cfg.DurationWindow = cmp.Or(cfg.DurationWindow, time.Hour)
	cfg.DurationSample = cmp.Or(cfg.DurationSample, 100)
	if cfg.DurationWindow < 0 || cfg.DurationSample < 1 {
		return nil, fmt.Errorf("error configuring the task router: duration window %s and sample %d must be positive",
			cfg.DurationWindow, cfg.DurationSample)
	}
	router, err := routing.NewRouter(&cfg.Routing)
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if m == nil {
		m = metrics.New(nil)
	}
	return &TaskRouter{cfg: cfg, router: router, logger: logger, metrics: m,
		rings: map[string]*routing.Ring{}, seq: map[uuid.UUID]uint64{}}, nil
}

// Live is how recently an agent must have heartbeated to get work.
func (r *TaskRouter) Live() time.Duration { return r.cfg.Live }

// Route decides the preferred agents of new tasks, before they are
// written (a axtype.RouteFunc, with e the transaction that makes them: the
// candidates are read with it). Tasks with no candidate at all are
// written parked (axtype.TaskRoute.NoAgent) until the reaper finds one
// (db.TaskNoAgentUnpark). Tasks with no healthy candidate, or only one,
// get no route: any matching agent may take them. Pinned and agentless
// tasks are not routed.
func (r *TaskRouter) Route(ctx context.Context, e db.Executor, tasks []*axtype.NewTask) ([]axtype.TaskRoute, error) {
	if !slices.ContainsFunc(tasks, routable) {
		return nil, nil
	}
	agents, err := r.candidates(ctx, e)
	if err != nil {
		return nil, err
	}
	keys := r.renderKeys(ctx, tasks) // before the lock: a job's template never holds up another's fire
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.decide(ctx, agents, tasks, keys), nil
}

// RouteFunc is Route with e, for db.ExecutionInsertMany; it renders the
// tasks' concurrency keys first, also without a router (nil r).
func (r *TaskRouter) RouteFunc(e db.Executor) axtype.RouteFunc {
	return func(ctx context.Context, tasks []*axtype.NewTask) ([]axtype.TaskRoute, error) {
		renderConcurrencyKeys(tasks)
		if r == nil {
			return nil, nil
		}
		return r.Route(ctx, e, tasks)
	}
}

// routable reports whether the router places t: an agent may lease it and
// it is not made for one agent.
func routable(t *axtype.NewTask) bool { return !t.Pinned && !t.Agentless }

// candidates returns the current snapshot, reading a new one with e when
// it is older than Refresh. With e, not the pool: Route runs inside the
// transaction that made the tasks, and taking a second connection while
// it holds one (and its locks) deadlocks once the pool is exhausted by
// transactions doing the same, or queued behind a lock one of them holds.
func (r *TaskRouter) candidates(ctx context.Context, e db.Executor) ([]*axtype.Candidate, error) {
	r.mu.Lock()
	s := r.snapshot
	r.mu.Unlock()
	if s != nil && time.Since(s.at) < r.cfg.Refresh {
		return s.agents, nil
	}
	agents, err := db.AgentListCandidates(ctx, e, &db.CandidateQuery{Live: r.cfg.Live,
		DurationWindow: r.cfg.DurationWindow, DurationSample: r.cfg.DurationSample, Now: r.cfg.Clock.Now()})
	if err != nil {
		return nil, fmt.Errorf("error routing tasks: %w", err)
	}
	r.mu.Lock()
	r.snapshot = &candidateSnapshot{at: time.Now(), agents: agents}
	r.mu.Unlock()
	return agents, nil
}

// renderKeys renders the route key of each unpinned task, by index; a key
// that does not render is "" and its task is left unassigned.
func (r *TaskRouter) renderKeys(ctx context.Context, tasks []*axtype.NewTask) []routeKeyResult {
	keys := make([]routeKeyResult, len(tasks))
	params := runParams{}
	for i, t := range tasks {
		if !routable(t) {
			continue
		}
		key, err := renderRouteKey(t, params)
		if err != nil {
			// A params mismatch is the job's problem, not a reason to lose
			// the fire: the task runs unassigned and the log says why.
			r.logger.WarnContext(ctx, "route key not rendered; task left unassigned", "job_id", t.JobID,
				"execution_id", t.ExecutionID, "task_id", t.ID, "error", err)
		}
		keys[i] = routeKeyResult{key: key, ok: err == nil}
	}
	return keys
}

// routeKeyResult is a task's rendered route key.
type routeKeyResult struct {
	key string
	ok  bool
}

// decide routes every unpinned task; the caller holds r.mu.
func (r *TaskRouter) decide(ctx context.Context, agents []*axtype.Candidate, tasks []*axtype.NewTask, keys []routeKeyResult) []axtype.TaskRoute {
	pools := map[string]*batchPool{}
	var routes []axtype.TaskRoute
	for i, t := range tasks {
		if !routable(t) || !keys[i].ok {
			continue
		}
		labels := string(t.ExecutorKind) + " " + labelKey(t.TargetLabels)
		bp := pools[labels]
		if bp == nil {
			bp = r.newBatchPool(agents, t.TargetLabels, t.ExecutorKind)
			pools[labels] = bp
		}
		route, ok := r.decideOne(bp, t, keys[i].key)
		if ok {
			routes = append(routes, route)
		}
	}
	return routes
}

// decideOne routes one task by its rendered key; false leaves it
// unassigned. A task no candidate could take is parked (NoAgent).
func (r *TaskRouter) decideOne(bp *batchPool, t *axtype.NewTask, key string) (axtype.TaskRoute, bool) {
	if len(bp.agents) == 0 {
		return axtype.TaskRoute{TaskID: t.ID, RouteKey: key, NoAgent: true}, true
	}
	if bp.healthy < 2 {
		return axtype.TaskRoute{}, false
	}
	strategy := routing.Strategy(t.RouteStrategy)
	req := routing.Request{Strategy: strategy, Key: key, Rand: rand.Uint64()}
	if strategy == routing.StrategyRoundRobin {
		req.Seq = r.seq[t.JobID]
		r.seq[t.JobID]++
	}
	preferred, ok := bp.pool.Pick(req)
	if !ok {
		return axtype.TaskRoute{}, false
	}
	bp.pool.Assigned(preferred)
	route := axtype.TaskRoute{TaskID: t.ID, Preferred: uuid.MustParse(preferred), RouteKey: key}
	if strategy.NeedsKey() {
		if fallback, ok := bp.without(r.router, preferred).Pick(req); ok {
			route.Fallback = uuid.MustParse(fallback)
		}
	}
	r.metrics.TasksRouted.WithLabelValues(string(strategy), preferred).Inc()
	return route, true
}

// batchPool is the routing pool of one label set and executor kind (the
// agents that may lease such tasks) for one batch, with the
// pools that leave one agent out (for keyed runners-up), built on demand.
type batchPool struct {
	agents   []routing.Agent
	ring     *routing.Ring
	pool     *routing.Pool
	healthy  int
	excluded map[string]*routing.Pool // pool without the agent, by agent id
}

func (r *TaskRouter) newBatchPool(candidates []*axtype.Candidate, target map[string]string, kind axtype.ExecutorKind) *batchPool {
	bp := &batchPool{excluded: map[string]*routing.Pool{}}
	var members []string
	for _, c := range candidates {
		if !labelsMatch(c.Labels, target) || (kind != "" && !slices.Contains(c.Executors, string(kind))) ||
			(c.LabelBound && len(target) == 0) {
			continue
		}
		a := routing.Agent{ID: c.ID.String(), Weight: c.Weight, Capacity: c.Capacity, Running: c.Running,
			Load: c.Load, AvgDuration: c.AvgTaskDuration, Healthy: c.Healthy}
		bp.agents = append(bp.agents, a)
		if a.Healthy {
			bp.healthy++
			members = append(members, a.ID)
		}
	}
	bp.ring = r.ring(members)
	bp.pool = r.router.NewPool(bp.agents, bp.ring)
	return bp
}

// without returns the pool with agent id unhealthy: its Pick of a key is
// the runner-up, the agent that owns the key once id is gone.
func (bp *batchPool) without(router *routing.Router, id string) *routing.Pool {
	if p, ok := bp.excluded[id]; ok {
		return p
	}
	agents := slices.Clone(bp.agents)
	for i := range agents {
		if agents[i].ID == id {
			agents[i].Healthy = false
		}
	}
	p := router.NewPool(agents, bp.ring)
	bp.excluded[id] = p
	return p
}

// ring returns the consistent-hash ring of members, built once per
// membership (a ring costs Slots × members to build).
func (r *TaskRouter) ring(members []string) *routing.Ring {
	slices.Sort(members)
	key := strings.Join(members, ",")
	if ring, ok := r.rings[key]; ok {
		return ring
	}
	if len(r.rings) > 64 { // memberships churned: start over
		clear(r.rings)
	}
	ring := r.router.NewRing(members)
	r.rings[key] = ring
	return ring
}

// labelsMatch reports whether an agent's labels include all of target.
func labelsMatch(agent, target map[string]string) bool {
	for k, v := range target {
		if agent[k] != v {
			return false
		}
	}
	return true
}

// labelKey identifies a label set.
func labelKey(labels map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(labels[k])
		b.WriteByte(0)
	}
	return b.String()
}

// defaultLive is how recently an agent must have heartbeated to get a
// broadcast task when no router is configured: 2 default heartbeats.
const defaultLive = 10 * time.Second

// InsertExecutions records fires, makes their tasks (shard generators
// rendered by GeneratedShardParams) routed as they are written, and hands
// agentless HTTP tasks to the outbox, all in e (the fire's transaction).
// It adds to ready (nil: none) whom the fire's task-ready notification is
// for (ReadyFor).
func InsertExecutions(ctx context.Context, e db.Executor, router *TaskRouter, outbox *delivery.Outbox, execs []*axtype.NewExecution,
	ready *notify.Targets) ([]axtype.InsertedExecution, error) {
	live := defaultLive
	if router != nil {
		live = router.Live()
	}
	inserted, tasks, err := db.ExecutionInsertMany(ctx, e, execs, live, GeneratedShardParams, router.RouteFunc(e))
	if err != nil {
		return inserted, err
	}
	if ready != nil {
		ReadyFor(ready, tasks, time.Now())
	}
	return inserted, outbox.Fired(ctx, e, tasks)
}

// ReadyFor adds to ready the waiting polls that new tasks are for: the
// agent each is routed to (by ReadyKey when it may lease the task at now,
// by LaterKey when later), or everyone for a task any agent may take at
// once, or one of a concurrency key (a lease of any agent may unpark or
// take it). Agentless tasks and tasks written failed are for no one. The
// other polls look when the routed tasks may be stolen
// (notify.Notifier.Target).
func ReadyFor(ready *notify.Targets, tasks []*axtype.NewTask, now time.Time) {
	for _, t := range tasks {
		switch {
		case t.Agentless || t.ConcurrencyError != "":
		case t.ConcurrencyTemplate != "" || t.Preferred == uuid.Nil:
			ready.Add("")
		case t.NotBefore.After(now):
			ready.Add(LaterKey(t.Preferred))
		default:
			ready.Add(ReadyKey(t.Preferred))
		}
	}
}

// ReadyKey names an agent in a task-ready notification of tasks it may
// lease at once: its waiting polls lease without a check first.
func ReadyKey(agent uuid.UUID) string { return agent.String() }

// LaterKey names an agent in a task-ready notification of tasks it may
// lease later (a fire made ahead of its tick): its waiting polls check
// when they may, and sleep until then (leasing at once would find
// nothing, and cost a lease).
func LaterKey(agent uuid.UUID) string { return "later:" + agent.String() }
