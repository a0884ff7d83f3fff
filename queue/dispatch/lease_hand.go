package dispatch

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// The lease batching policy: which agents share a pick, how many tasks
// each pick asks for, and to which agent each picked task goes. db runs
// the statements (TaskLeasePick, TaskLeaseTake) this hands it.

// LeaseParams asks for tasks for one agent.
type LeaseParams struct {
	AgentID     uuid.UUID
	AgentLabels map[string]string
	// AgentExecutors are the task kinds the agent accepts; tasks of other
	// kinds are never leased to it. Empty: DefaultExecutors.
	AgentExecutors []string
	// AgentLabelBound: the agent registered with a key bound to labels and
	// takes no task of an untargeted job.
	AgentLabelBound bool
	Max             int
	Lease           time.Duration
	// StealAfter is how long a task routed to another agent waits before
	// this one may take it (its runner-up first; anyone after three times
	// as long).
	StealAfter time.Duration
	// StarveAfter is how long a ready task may wait before it is leased
	// ahead of higher priorities.
	StarveAfter time.Duration
	// Grants are the tokens taken for this lease (RateClassTake): at most
	// that many tasks of each class; classes not listed lease none.
	Grants map[string]int
	// Now, when set, replaces the database clock for readiness, steal
	// and starve delays and the lease's expiry (tests); nil: now().
	Now *time.Time
}

// Lease claims up to Max pending tasks the agent may run: it picks and
// locks them, then leases them, in one transaction of b (a savepoint when
// b is a transaction).
func Lease(ctx context.Context, b db.TxBeginner, p *LeaseParams) ([]*axtype.LeasedTask, error) {
	out, err := LeaseMany(ctx, b, &LeaseBatch{
		Agents: []axtype.LeaseAgent{{ID: p.AgentID, Labels: p.AgentLabels, Executors: p.AgentExecutors,
			LabelBound: p.AgentLabelBound, Max: p.Max}},
		Lease: p.Lease, StealAfter: p.StealAfter, StarveAfter: p.StarveAfter, Grants: p.Grants, Now: p.Now})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// LeaseBatch asks for tasks for several agents at once (see LeaseParams
// for the settings they share).
type LeaseBatch struct {
	Agents                         []axtype.LeaseAgent
	Lease, StealAfter, StarveAfter time.Duration
	Grants                         map[string]int
	Now                            *time.Time
	// SkipUnpark leaves parked keyed tasks as they are (the caller
	// unparked them, or knows no key freed a place); false: unpark first.
	SkipUnpark bool
}

// LeaseMany leases tasks for every agent of batch in one transaction of
// b: out[i] are Agents[i]'s. Agents of the same labels, executor kinds
// and label binding share one pick (db.TaskLeasePick), and one statement
// leases the tasks of all (db.TaskLeaseTake): the cost of a lease hardly
// grows with the agents served at once. An agent listed twice is served
// as two asks.
func LeaseMany(ctx context.Context, b db.TxBeginner, batch *LeaseBatch) ([][]*axtype.LeasedTask, error) {
	total := 0
	for _, a := range batch.Agents {
		total += a.Max
	}
	// Tasks waiting behind their key's limit that freed places have room
	// for are unparked first, in a transaction of their own: its key
	// locks and the lease's in one transaction could wait on another
	// lease's crosswise. Within a caller's transaction (a probe) this is
	// left to the next lease.
	if e, ok := b.(db.Executor); ok && !batch.SkipUnpark {
		if _, inTx := b.(pgx.Tx); !inTx {
			if _, err := db.TaskConcurrencyUnpark(ctx, e, batch.Now); err != nil {
				return nil, fmt.Errorf("error leasing tasks: %w", err)
			}
		}
	}
	out := make([][]*axtype.LeasedTask, len(batch.Agents))
	_, err := db.WithBatchTxV(ctx, b, total, func(tx pgx.Tx) (struct{}, error) {
		take := db.TaskLeaseTakeParams{Lease: batch.Lease, Now: batch.Now}
		runs := map[uuid.UUID]bool{}
		run := map[uuid.UUID]uuid.UUID{} // task → its execution, for the tasks handed out
		var keyed []axtype.LeaseCandidate
		h := newLeaseHand(batch)
		if len(batch.Agents) > 1 {
			if err := h.leaveOutInactive(ctx, tx); err != nil {
				return struct{}{}, err
			}
		}
		groups := leaseGroups(batch.Agents)
		for _, group := range groups {
			pick := h.pickParams(group)
			if len(pick.AgentIDs) == 0 {
				continue
			}
			// One pick locks its keys itself; several lock them all in
			// one pass after (two passes could wait on another
			// lease's crosswise).
			pick.LockKeys = len(groups) == 1
			picked, short, err := db.TaskLeasePick(ctx, tx, pick)
			if err != nil {
				return struct{}{}, err
			}
			hand := func(picked []axtype.LeaseCandidate) {
				for _, c := range picked {
					if i := h.handTo(group, c); i >= 0 {
						take.TaskIDs = append(take.TaskIDs, c.ID)
						take.AgentIDs = append(take.AgentIDs, batch.Agents[i].ID)
						run[c.ID] = c.ExecutionID
						if c.ConcurrencyKey != "" {
							keyed = append(keyed, c)
						}
					}
				}
			}
			hand(picked)
			if !short {
				continue
			}
			// Pool shares came short, maybe for tasks another lease holds
			// (counted in a share, not taken): the room left is picked as
			// before shares. No keyed task, so no key to lock.
			if again := h.pickParams(group); len(again.AgentIDs) > 0 {
				again.NoShares = true
				if picked, _, err = db.TaskLeasePick(ctx, tx, again); err != nil {
					return struct{}{}, err
				}
				hand(picked)
			}
		}
		if len(keyed) > 0 {
			// Only what the keys still have room for, counted under their
			// locks, is leased (TaskLeaseTake); the rest stays pending.
			if len(groups) > 1 {
				if err := db.TaskConcurrencyLock(ctx, tx, keyed); err != nil {
					return struct{}{}, err
				}
			}
			take.KeyNths = keyNths(take.TaskIDs, keyed)
		}
		if len(take.TaskIDs) == 0 {
			return struct{}{}, nil
		}
		for _, id := range take.TaskIDs {
			if r := run[id]; !runs[r] {
				runs[r] = true
				take.ExecutionIDs = append(take.ExecutionIDs, r)
			}
		}
		leased, err := db.TaskLeaseTake(ctx, tx, &take)
		if err != nil {
			return struct{}{}, err
		}
		for _, t := range leased {
			i := h.owner[t.ID]
			out[i] = append(out[i], t)
		}
		return struct{}{}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("error leasing tasks: %w", err)
	}
	return out, nil
}

// leaseGroups groups the indexes of agents that may take the same tasks:
// same labels, executor kinds and label binding.
func leaseGroups(agents []axtype.LeaseAgent) [][]int {
	var groups [][]int
	for i, a := range agents {
		found := false
		for g, group := range groups {
			first := agents[group[0]]
			if first.LabelBound == a.LabelBound && maps.Equal(first.Labels, a.Labels) &&
				slices.Equal(executorsOr(first.Executors), executorsOr(a.Executors)) {
				groups[g] = append(groups[g], i)
				found = true
				break
			}
		}
		if !found {
			groups = append(groups, []int{i})
		}
	}
	return groups
}

// executorsOr is an agent's executor kinds, DefaultExecutors when none.
func executorsOr(kinds []string) []string {
	if len(kinds) == 0 {
		return axtype.DefaultExecutors
	}
	return kinds
}

// leaseHand hands picked tasks to the agents of a batch: each agent gets
// at most its Max, the rate class grants are shared by all, and the run
// params the tasks carry stay within axtype.MaxLeaseParamsBytes an agent
// and axtype.MaxLeaseBatchParamsBytes the batch (an agent's first task
// whatever its params). A task past them stays pending for a later lease.
type leaseHand struct {
	batch       *LeaseBatch
	room        []int
	handed      []int // tasks handed to each agent
	paramsBytes []int // their run params, each agent's
	batchBytes  int   // all agents' together
	grants      map[string]int
	owner       map[uuid.UUID]int // task → index of the agent it was handed to
	// maxParamsBytes and maxBatchParamsBytes are the budgets (tests
	// lower them).
	maxParamsBytes, maxBatchParamsBytes int
}

func newLeaseHand(batch *LeaseBatch) *leaseHand {
	h := &leaseHand{batch: batch, room: make([]int, len(batch.Agents)), handed: make([]int, len(batch.Agents)),
		paramsBytes: make([]int, len(batch.Agents)), grants: maps.Clone(batch.Grants), owner: map[uuid.UUID]int{},
		maxParamsBytes: axtype.MaxLeaseParamsBytes, maxBatchParamsBytes: axtype.MaxLeaseBatchParamsBytes}
	for i, a := range batch.Agents {
		h.room[i] = a.Max
	}
	return h
}

// leaveOutInactive gives no room to the agents that may not lease now
// (drained while their polls waited): their share goes to the others.
func (h *leaseHand) leaveOutInactive(ctx context.Context, tx pgx.Tx) error {
	ids := make([]uuid.UUID, len(h.batch.Agents))
	for i, a := range h.batch.Agents {
		ids[i] = a.ID
	}
	leasable, err := db.AgentsLeasable(ctx, tx, ids)
	if err != nil {
		return err
	}
	for i, a := range h.batch.Agents {
		if !slices.Contains(leasable, a.ID) {
			h.room[i] = 0
		}
	}
	return nil
}

// pickParams asks for what group still has room for, within the grants
// left (no AgentIDs when it has none).
func (h *leaseHand) pickParams(group []int) *db.TaskLeasePickParams {
	first := h.batch.Agents[group[0]]
	pick := &db.TaskLeasePickParams{Labels: first.Labels, Executors: first.Executors, LabelBound: first.LabelBound,
		StealAfter: h.batch.StealAfter, StarveAfter: h.batch.StarveAfter, Caps: map[string]int{}, Now: h.batch.Now,
		Taken: make([]uuid.UUID, 0, len(h.owner))}
	for id := range h.owner {
		pick.Taken = append(pick.Taken, id)
	}
	for _, i := range group {
		if h.room[i] > 0 {
			pick.AgentIDs = append(pick.AgentIDs, h.batch.Agents[i].ID)
			pick.Maxes = append(pick.Maxes, h.room[i])
		}
	}
	for class, n := range h.grants {
		if n > 0 {
			pick.Caps[class] = n
		}
	}
	return pick
}

// handTo hands the picked task c to an agent of group that may take it
// and has room, and returns its index (-1: none; the task stays pending).
// Its preferred agent comes first; then, when it may be stolen, its
// runner-up or (steal any, or unassigned) the agent with the most room,
// so that a batch spreads its tasks as separate leases would.
func (h *leaseHand) handTo(group []int, c axtype.LeaseCandidate) int {
	if _, dup := h.owner[c.ID]; dup {
		return -1 // picked for an earlier group as well
	}
	if c.RateClass != "" && h.grants[c.RateClass] <= 0 {
		return -1
	}
	chosen := -1
	if c.PreferredAgentID != nil {
		chosen = h.withRoom(group, *c.PreferredAgentID, c.ParamsBytes)
	}
	switch {
	case chosen >= 0:
	case c.Steal == axtype.LeaseStealRunnerUp && c.FallbackAgentID != nil:
		chosen = h.withRoom(group, *c.FallbackAgentID, c.ParamsBytes)
	case c.Steal == axtype.LeaseStealAny:
		for _, i := range group {
			if h.mayTake(i, c.ParamsBytes) && (chosen < 0 || h.room[i] > h.room[chosen]) {
				chosen = i
			}
		}
	}
	if chosen < 0 {
		return -1
	}
	h.room[chosen]--
	h.handed[chosen]++
	h.paramsBytes[chosen] += c.ParamsBytes
	h.batchBytes += c.ParamsBytes
	h.owner[c.ID] = chosen
	if c.RateClass != "" {
		h.grants[c.RateClass]--
	}
	return chosen
}

// withRoom returns the index of agent id in group when it may take a
// task of paramsBytes, or -1.
func (h *leaseHand) withRoom(group []int, id uuid.UUID, paramsBytes int) int {
	for _, i := range group {
		if h.batch.Agents[i].ID == id && h.mayTake(i, paramsBytes) {
			return i
		}
	}
	return -1
}

// mayTake says whether agent i has room for a task whose run params are
// paramsBytes, within the params budgets (its first task always fits).
func (h *leaseHand) mayTake(i, paramsBytes int) bool {
	switch {
	case h.room[i] <= 0:
		return false
	case h.handed[i] == 0 || paramsBytes == 0:
		return true
	}
	return h.paramsBytes[i]+paramsBytes <= h.maxParamsBytes && h.batchBytes+paramsBytes <= h.maxBatchParamsBytes
}

// keyNths gives each of tasks its place among the tasks of its
// concurrency key in tasks (1, 2, ...; keyed are the keyed ones), 0 to
// those without a key.
func keyNths(tasks []uuid.UUID, keyed []axtype.LeaseCandidate) []int32 {
	type key struct{ scope, key string }
	keyOf := make(map[uuid.UUID]key, len(keyed))
	for _, c := range keyed {
		keyOf[c.ID] = key{c.ConcurrencyScope, c.ConcurrencyKey}
	}
	seen := map[key]int32{}
	nths := make([]int32, len(tasks))
	for i, id := range tasks {
		if k, ok := keyOf[id]; ok {
			seen[k]++
			nths[i] = seen[k]
		}
	}
	return nths
}
