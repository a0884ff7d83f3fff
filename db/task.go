package db

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// TaskListByExecution returns an execution's tasks in shard order.
func TaskListByExecution(ctx context.Context, e Executor, executionID uuid.UUID) ([]*axtype.Task, error) {
	rows, err := queries.TaskListByExecution(ctx, e, executionID)
	if err != nil {
		return nil, fmt.Errorf("error listing tasks of execution %s: %w", executionID, mapErr(err))
	}
	out := make([]*axtype.Task, len(rows))
	for i, r := range rows {
		out[i] = &axtype.Task{
			ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
			ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, State: axtype.TaskState(r.State),
			Priority: int(r.Priority), Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			LostLeases: int(r.LostLeases), TimeoutSeconds: int(r.TimeoutSeconds), NotBefore: r.NotBefore.UTC(),
			AgentID: r.AgentID, LeasedAt: utcPtr(r.LeasedAt), StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt),
			CancelRequestedAt: utcPtr(r.CancelRequestedAt), Result: r.Result, Error: deref(r.Error),
			ErrorCode: deref(r.ErrorCode), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		}
	}
	return out, nil
}

// TaskLeaseParams asks for tasks for one agent.
type TaskLeaseParams struct {
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

// TaskLease claims up to Max pending tasks the agent may run: it picks and
// locks them, then leases them, in one transaction of b (a savepoint when
// b is a transaction).
func TaskLease(ctx context.Context, b TxBeginner, p *TaskLeaseParams) ([]*axtype.LeasedTask, error) {
	out, err := TaskLeaseMany(ctx, b, &TaskLeaseBatch{
		Agents: []axtype.LeaseAgent{{ID: p.AgentID, Labels: p.AgentLabels, Executors: p.AgentExecutors,
			LabelBound: p.AgentLabelBound, Max: p.Max}},
		Lease: p.Lease, StealAfter: p.StealAfter, StarveAfter: p.StarveAfter, Grants: p.Grants, Now: p.Now})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// TaskLeaseBatch asks for tasks for several agents at once (see
// TaskLeaseParams for the settings they share).
type TaskLeaseBatch struct {
	Agents                         []axtype.LeaseAgent
	Lease, StealAfter, StarveAfter time.Duration
	Grants                         map[string]int
	Now                            *time.Time
}

// TaskLeaseMany leases tasks for every agent of batch in one transaction
// of b: out[i] are Agents[i]'s. Agents of the same labels, executor kinds
// and label binding share one pick (TaskLeasePick), and one statement
// leases the tasks of all (TaskLeaseTake): the cost of a lease hardly
// grows with the agents served at once. An agent listed twice is served
// as two asks.
func TaskLeaseMany(ctx context.Context, b TxBeginner, batch *TaskLeaseBatch) ([][]*axtype.LeasedTask, error) {
	total := 0
	for _, a := range batch.Agents {
		total += a.Max
	}
	out := make([][]*axtype.LeasedTask, len(batch.Agents))
	err := withBatchTx(ctx, b, total, func(tx pgx.Tx) error {
		take := dbsqlc.TaskLeaseTakeParams{LeaseSeconds: batch.Lease.Seconds(), Now: batch.Now}
		runs := map[uuid.UUID]bool{}
		h := newLeaseHand(batch)
		var keyed []dbsqlc.TaskLeasePickRow
		if len(batch.Agents) > 1 {
			if err := h.leaveOutInactive(ctx, tx); err != nil {
				return err
			}
		}
		for _, group := range leaseGroups(batch.Agents) {
			pick, err := h.pickParams(group)
			if err != nil {
				return err
			}
			if pick.Max == 0 {
				continue
			}
			picked, err := queries.TaskLeasePick(ctx, tx, pick)
			if err != nil {
				return err
			}
			for _, r := range picked {
				if i := h.handTo(group, r); i >= 0 {
					take.TaskIds = append(take.TaskIds, r.ID)
					take.AgentIds = append(take.AgentIds, batch.Agents[i].ID)
					if r.ConcurrencyKey != "" {
						keyed = append(keyed, r)
					}
				}
			}
		}
		if len(keyed) > 0 {
			admitted, err := concurrencyAdmit(ctx, tx, keyed)
			if err != nil {
				return err
			}
			take.TaskIds, take.AgentIds = keepAdmitted(take.TaskIds, take.AgentIds, keyed, admitted)
		}
		if len(take.TaskIds) == 0 {
			return nil
		}
		for _, id := range take.TaskIds {
			if r := h.run[id]; !runs[r] {
				runs[r] = true
				take.ExecutionIds = append(take.ExecutionIds, r)
			}
		}
		rows, err := queries.TaskLeaseTake(ctx, tx, take)
		if err != nil {
			return err
		}
		leased, err := leasedTasks(rows)
		if err != nil {
			return err
		}
		for _, t := range leased {
			i := h.owner[t.ID]
			out[i] = append(out[i], t)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("error leasing tasks: %w", mapErr(err))
	}
	return out, nil
}

// withBatchTx is WithBatchTxV for a function without a value.
func withBatchTx(ctx context.Context, b TxBeginner, size int, fn func(tx pgx.Tx) error) error {
	_, err := WithBatchTxV(ctx, b, size, func(tx pgx.Tx) (struct{}, error) { return struct{}{}, fn(tx) })
	return err
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
				slices.Equal(cmpSlice(first.Executors, axtype.DefaultExecutors), cmpSlice(a.Executors, axtype.DefaultExecutors)) {
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

// leaseHand hands picked tasks to the agents of a batch: each agent gets
// at most its Max, and the rate class grants are shared by all.
type leaseHand struct {
	batch  *TaskLeaseBatch
	room   []int
	grants map[string]int
	owner  map[uuid.UUID]int       // task → index of the agent it was handed to
	run    map[uuid.UUID]uuid.UUID // task → its execution, for the tasks handed out
}

func newLeaseHand(batch *TaskLeaseBatch) *leaseHand {
	h := &leaseHand{batch: batch, room: make([]int, len(batch.Agents)), grants: maps.Clone(batch.Grants),
		owner: map[uuid.UUID]int{}, run: map[uuid.UUID]uuid.UUID{}}
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
	leasable, err := queries.AgentsLeasable(ctx, tx, ids)
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
// left (pick.Max is 0 when it has none).
func (h *leaseHand) pickParams(group []int) (dbsqlc.TaskLeasePickParams, error) {
	first := h.batch.Agents[group[0]]
	labels, err := json.Marshal(nonNilMap(first.Labels))
	if err != nil {
		return dbsqlc.TaskLeasePickParams{}, fmt.Errorf("error encoding agent labels: %w", err)
	}
	pick := dbsqlc.TaskLeasePickParams{
		AgentLabels: labels, Executors: cmpSlice(first.Executors, axtype.DefaultExecutors), LabelBound: first.LabelBound,
		StealSeconds: h.batch.StealAfter.Seconds(), StealAnySeconds: 3 * h.batch.StealAfter.Seconds(),
		StarveSeconds: h.batch.StarveAfter.Seconds(), Classes: []string{}, Caps: []int32{}, Now: h.batch.Now,
		Taken: make([]uuid.UUID, 0, len(h.owner)),
	}
	for id := range h.owner {
		pick.Taken = append(pick.Taken, id)
	}
	for _, i := range group {
		if h.room[i] > 0 {
			pick.AgentIds = append(pick.AgentIds, h.batch.Agents[i].ID)
			pick.Maxes = append(pick.Maxes, int32(h.room[i]))
			pick.Max += int32(h.room[i])
		}
	}
	for class, n := range h.grants {
		if n > 0 {
			pick.Classes = append(pick.Classes, class)
			pick.Caps = append(pick.Caps, int32(n))
		}
	}
	return pick, nil
}

// handTo hands the picked task r to an agent of group that may take it
// and has room, and returns its index (-1: none; the task stays pending).
// Its preferred agent comes first; then, when it may be stolen, its
// runner-up or (steal 2, or unassigned) the agent with the most room, so
// that a batch spreads its tasks as separate leases would.
func (h *leaseHand) handTo(group []int, r dbsqlc.TaskLeasePickRow) int {
	if _, dup := h.owner[r.ID]; dup {
		return -1 // picked for an earlier group as well
	}
	if r.RateClass != "" && h.grants[r.RateClass] <= 0 {
		return -1
	}
	chosen := -1
	if r.PreferredAgentID != nil {
		chosen = h.withRoom(group, *r.PreferredAgentID)
	}
	switch {
	case chosen >= 0:
	case r.Steal == 1 && r.FallbackAgentID != nil:
		chosen = h.withRoom(group, *r.FallbackAgentID)
	case r.Steal == 2:
		for _, i := range group {
			if h.room[i] > 0 && (chosen < 0 || h.room[i] > h.room[chosen]) {
				chosen = i
			}
		}
	}
	if chosen < 0 {
		return -1
	}
	h.room[chosen]--
	h.owner[r.ID] = chosen
	h.run[r.ID] = r.ExecutionID
	if r.RateClass != "" {
		h.grants[r.RateClass]--
	}
	return chosen
}

// withRoom returns the index of agent id in group when it has room, or -1.
func (h *leaseHand) withRoom(group []int, id uuid.UUID) int {
	for _, i := range group {
		if h.batch.Agents[i].ID == id && h.room[i] > 0 {
			return i
		}
	}
	return -1
}

// concurrencyLockClass is the first key of the advisory locks of
// concurrency keys (the two-int4 form, apart from the one-bigint locks of
// migrations): "ax" and this feature's migration number.
const concurrencyLockClass = 0x61780057

// concurrencyAdmit locks the keys of the keyed tasks handed out (in hash
// order, see TaskConcurrencyLock) and returns those their keys have room
// for (TaskConcurrencyAdmit). Two keys of the same hash share a lock:
// they serialize their leases, nothing worse.
func concurrencyAdmit(ctx context.Context, tx pgx.Tx, keyed []dbsqlc.TaskLeasePickRow) (map[uuid.UUID]bool, error) {
	seen := map[int32]bool{}
	hashes := make([]int32, 0, len(keyed))
	p := dbsqlc.TaskConcurrencyAdmitParams{}
	for _, r := range keyed {
		h := fnv.New32a()
		h.Write([]byte(r.ConcurrencyScope))
		h.Write([]byte{0})
		h.Write([]byte(r.ConcurrencyKey))
		if v := int32(h.Sum32()); !seen[v] {
			seen[v] = true
			hashes = append(hashes, v)
		}
		p.Ids = append(p.Ids, r.ID)
		p.Scopes = append(p.Scopes, r.ConcurrencyScope)
		p.Keys = append(p.Keys, r.ConcurrencyKey)
		p.Limits = append(p.Limits, r.ConcurrencyLimit)
	}
	slices.Sort(hashes)
	if err := queries.TaskConcurrencyLock(ctx, tx, dbsqlc.TaskConcurrencyLockParams{
		LockClass: concurrencyLockClass, Hashes: hashes}); err != nil {
		return nil, err
	}
	ids, err := queries.TaskConcurrencyAdmit(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	admitted := make(map[uuid.UUID]bool, len(ids))
	for _, id := range ids {
		admitted[id] = true
	}
	return admitted, nil
}

// keepAdmitted leaves out of the lease the keyed tasks not admitted (they
// stay pending, for a later lease); the others are kept in order.
func keepAdmitted(tasks, agents []uuid.UUID, keyed []dbsqlc.TaskLeasePickRow, admitted map[uuid.UUID]bool) (keptTasks, keptAgents []uuid.UUID) {
	out := make(map[uuid.UUID]bool, len(keyed))
	for _, r := range keyed {
		if !admitted[r.ID] {
			out[r.ID] = true
		}
	}
	if len(out) == 0 {
		return tasks, agents
	}
	for i, id := range tasks {
		if !out[id] {
			keptTasks = append(keptTasks, id)
			keptAgents = append(keptAgents, agents[i])
		}
	}
	return keptTasks, keptAgents
}

func leasedTasks(rows []dbsqlc.TaskLeaseTakeRow) ([]*axtype.LeasedTask, error) {
	out := make([]*axtype.LeasedTask, len(rows))
	for i, r := range rows {
		exec, err := executorConfigFromJSON(r.Executor)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", r.JobID, err)
		}
		out[i] = &axtype.LeasedTask{ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
			ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, Attempt: int(r.Attempt),
			MaxAttempts: int(r.MaxAttempts), TimeoutSeconds: int(r.TimeoutSeconds), LeaseToken: r.LeaseToken,
			LeaseExpiresAt: r.LeaseExpiresAt.UTC(), Deadline: r.Deadline.UTC(), ExecutorKind: axtype.ExecutorKind(r.ExecutorKind),
			Executor: exec, Params: r.Params, ScheduledFor: r.ScheduledFor.UTC(), JobName: r.JobName, JobGroup: r.GroupName,
			RoutedHere: r.RoutedHere, ReadyAt: r.ReadyAt.UTC(),
			Waited: time.Duration(r.WaitedSeconds * float64(time.Second)), RateClass: r.RateClass, Priority: int(r.Priority),
			TraceParent: r.Traceparent}
	}
	return out, nil
}

func splitRefs(refs []axtype.TaskRef) (ids, tokens []uuid.UUID) {
	ids, tokens = make([]uuid.UUID, len(refs)), make([]uuid.UUID, len(refs))
	for i, r := range refs {
		ids[i], tokens[i] = r.ID, r.Token
	}
	return ids, tokens
}

// TaskRenew extends the agent's current leases among refs; now, when set,
// replaces the database clock (tests).
func TaskRenew(ctx context.Context, e Executor, agentID uuid.UUID, refs []axtype.TaskRef, lease time.Duration, now *time.Time) ([]axtype.RenewedTask, error) {
	ids, tokens := splitRefs(refs)
	rows, err := queries.TaskRenew(ctx, e, dbsqlc.TaskRenewParams{
		TaskIds: ids, Tokens: tokens, AgentID: &agentID, LeaseSeconds: lease.Seconds(), Now: now,
	})
	if err != nil {
		return nil, fmt.Errorf("error renewing leases of agent %s: %w", agentID, mapErr(err))
	}
	out := make([]axtype.RenewedTask, len(rows))
	for i, r := range rows {
		out[i] = axtype.RenewedTask{ID: r.ID, Cancel: r.Cancel, LeaseExpiresAt: r.LeaseExpiresAt.UTC()}
	}
	return out, nil
}

// TaskComplete records results with current tokens; the others match
// nothing. Executions whose tasks all ended are finalized in the same call.
// It is for results ax reports itself (agentless HTTP tasks); agents'
// results go through TaskCompleteByAgent.
func TaskComplete(ctx context.Context, e Executor, results []axtype.TaskResult) ([]axtype.CompletedTask, error) {
	return taskComplete(ctx, e, make([]uuid.UUID, len(results)), results, nil) // uuid.Nil: no agent
}

// TaskCompleteByAgent is TaskComplete for results reported by an agent:
// a result of a task whose lease another agent holds matches nothing,
// even with the current token. now, when set, replaces the database clock
// a retry's backoff counts from (tests).
func TaskCompleteByAgent(ctx context.Context, e Executor, agentID uuid.UUID, results []axtype.TaskResult, now *time.Time) ([]axtype.CompletedTask, error) {
	agents := make([]uuid.UUID, len(results))
	for i := range agents {
		agents[i] = agentID
	}
	return taskComplete(ctx, e, agents, results, now)
}

// TaskCompleteByAgents is TaskCompleteByAgent for results of several
// agents at once: agents[i] reports results[i]. A task's results must all
// come from one agent (the first of a task's results is the one counted).
func TaskCompleteByAgents(ctx context.Context, e Executor, agents []uuid.UUID, results []axtype.TaskResult, now *time.Time) ([]axtype.CompletedTask, error) {
	if len(agents) != len(results) {
		return nil, fmt.Errorf("error completing tasks: %d agents for %d results", len(agents), len(results))
	}
	return taskComplete(ctx, e, agents, results, now)
}

func taskComplete(ctx context.Context, e Executor, agents []uuid.UUID, results []axtype.TaskResult, now *time.Time) ([]axtype.CompletedTask, error) {
	// The results that end runs are locked by one statement and written by
	// the next: both in one transaction, the caller's or one of our own.
	if _, inTx := e.(pgx.Tx); !inTx {
		if b, ok := e.(TxBeginner); ok {
			return WithTxV(ctx, b, func(tx pgx.Tx) ([]axtype.CompletedTask, error) {
				return taskComplete(ctx, tx, agents, results, now)
			})
		}
	}
	rows, written, err := taskCompleteRows(ctx, e, agents, storableResults(results), now)
	if err != nil {
		return nil, fmt.Errorf("error completing tasks: %w", mapErr(err))
	}
	out := make([]axtype.CompletedTask, len(rows))
	var single dbsqlc.ExecutionEndSingleParams
	var several []uuid.UUID
	for i, r := range rows {
		out[i] = axtype.CompletedTask{ID: r.ID, ExecutionID: r.ExecutionID, State: axtype.TaskState(r.State), ErrorCode: r.ErrorCode}
		switch {
		case r.EndsRun: // its outcome is written with its run (see TaskComplete)
			single.Ids = append(single.Ids, r.ExecutionID)
			single.States = append(single.States, r.State)
			single.TaskIds = append(single.TaskIds, r.ID)
			single.Results = append(single.Results, []byte(r.Result))
			single.Errors = append(single.Errors, r.Error)
			single.ErrorCodes = append(single.ErrorCodes, r.ErrorCode)
		case axtype.TaskState(r.State) == axtype.TaskPending: // a retry cannot end its execution
		default:
			several = append(several, r.ExecutionID)
		}
	}
	ended, err := executionFinalize(ctx, e, several)
	if err != nil {
		return nil, err
	}
	if len(single.Ids) > 0 {
		if err := executionEndSingle(ctx, e, &single, ended); err != nil {
			return nil, err
		}
	}
	bad := badResultErrors(written)
	for i := range out {
		out[i].Finalized = ended[out[i].ExecutionID]
		out[i].Error = bad[out[i].ID]
	}
	return out, nil
}

// executionEndSingle ends the runs of one shard whose results p holds and
// marks them in ended. A run it could not end (ended already, beside its
// task) keeps its task's outcome on the live row, and maintenance moves it.
func executionEndSingle(ctx context.Context, e Executor, p *dbsqlc.ExecutionEndSingleParams, ended map[uuid.UUID]bool) error {
	ids, err := queries.ExecutionEndSingle(ctx, e, *p)
	if err != nil {
		return fmt.Errorf("error ending executions: %w", mapErr(err))
	}
	for _, id := range ids {
		ended[id] = true
	}
	if len(ids) == len(p.Ids) {
		return nil
	}
	var rest dbsqlc.TaskRecordEndParams
	for i, id := range p.Ids {
		if !ended[id] {
			rest.TaskIds = append(rest.TaskIds, p.TaskIds[i])
			rest.States = append(rest.States, p.States[i])
			rest.Results = append(rest.Results, p.Results[i])
			rest.Errors = append(rest.Errors, p.Errors[i])
			rest.ErrorCodes = append(rest.ErrorCodes, p.ErrorCodes[i])
		}
	}
	if err := queries.TaskRecordEnd(ctx, e, rest); err != nil {
		return fmt.Errorf("error recording task outcomes: %w", mapErr(err))
	}
	return nil
}

// TaskRelease hands an agent's leases back without using up attempts.
func TaskRelease(ctx context.Context, e Executor, agentID uuid.UUID, refs []axtype.TaskRef) ([]uuid.UUID, error) {
	ids, tokens := splitRefs(refs)
	released, err := queries.TaskRelease(ctx, e, dbsqlc.TaskReleaseParams{TaskIds: ids, Tokens: tokens, AgentID: &agentID})
	if err != nil {
		return nil, fmt.Errorf("error releasing leases of agent %s: %w", agentID, mapErr(err))
	}
	return released, nil
}

// TaskLogAppendParams are chunks to store and the per-task cap.
type TaskLogAppendParams struct {
	// AgentID is the caller: only tasks whose lease it holds take chunks.
	AgentID uuid.UUID
	Chunks  []axtype.LogChunk
	// MaxBytes caps the output stored per task, every attempt counted.
	MaxBytes int64
	// Marker is the message of the one event recorded when a task's output
	// passes MaxBytes (stream "ax").
	Marker string
}

// TaskLogAppend stores chunks of tasks whose lease is current and held by
// p.AgentID, up to p.MaxBytes per task, and returns how many of the named
// tasks matched: a task past its cap matches and stores nothing, so 0
// means no lease was current (or none was the caller's).
func TaskLogAppend(ctx context.Context, e Executor, p *TaskLogAppendParams) (int, error) {
	q := dbsqlc.TaskLogAppendParams{AgentID: p.AgentID, MaxBytes: p.MaxBytes, Marker: p.Marker}
	for _, c := range p.Chunks {
		q.TaskIds = append(q.TaskIds, c.ID)
		q.Tokens = append(q.Tokens, c.Token)
		q.Streams = append(q.Streams, c.Stream)
		q.Data = append(q.Data, StorableText(c.Data)) // task output is any bytes
	}
	r, err := queries.TaskLogAppend(ctx, e, q)
	if err != nil {
		return 0, fmt.Errorf("error appending logs: %w", mapErr(err))
	}
	return int(r.Matched), nil
}

// TaskReapExpired ends up to p.Max expired leases and overdue tasks and
// finalizes the executions that ended with them. A lease lost with its
// agent runs again without using up an attempt, up to p.MaxLostLeases
// (see the query).
func TaskReapExpired(ctx context.Context, e Executor, p axtype.ReapPolicy) (axtype.Reaped, error) {
	rows, err := queries.TaskReapExpired(ctx, e, dbsqlc.TaskReapExpiredParams{Max: int32(p.Max), Now: p.Now,
		SilentSeconds: p.SilentFor.Seconds(), MaxLostLeases: int32(p.MaxLostLeases),
		TimeoutGraceSeconds: p.TimeoutGrace.Seconds()})
	if err != nil {
		return axtype.Reaped{}, fmt.Errorf("error reaping expired leases: %w", mapErr(err))
	}
	var r axtype.Reaped
	execs := make([]uuid.UUID, 0, len(rows))
	for _, row := range rows {
		execs = append(execs, row.ExecutionID)
		if row.TimedOut {
			r.TimedOut++
		} else {
			r.Expired++
		}
		if row.State == dbsqlc.AxTaskStatePending {
			r.Retried++
		}
		if row.Lost {
			r.Lost++
			if row.State == dbsqlc.AxTaskStateFailed {
				r.LostOut++
			}
		}
	}
	return r, ExecutionFinalize(ctx, e, execs)
}

// TaskNextLeasable reads the state of each agent of agentIDs and how long
// until it could lease a task, in one statement; an agent not found is
// left out. now, when set, replaces the database clock (tests).
func TaskNextLeasable(ctx context.Context, e Executor, agentIDs []uuid.UUID, stealAfter time.Duration, now *time.Time) (map[uuid.UUID]*axtype.LeaseOutlook, error) {
	rows, err := queries.TaskNextLeasable(ctx, e, dbsqlc.TaskNextLeasableParams{AgentIds: agentIDs, Now: now,
		StealSeconds: stealAfter.Seconds(), StealAnySeconds: 3 * stealAfter.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error finding the next task %d agents could lease: %w", len(agentIDs), mapErr(err))
	}
	out := make(map[uuid.UUID]*axtype.LeaseOutlook, len(rows))
	for _, r := range rows {
		out[r.ID] = &axtype.LeaseOutlook{State: axtype.AgentState(r.State), Ready: r.Ready, Next: time.Duration(r.Millis) * time.Millisecond}
	}
	return out, nil
}

// TaskSkipBelowFloor cancels waiting tasks under their class's floor whose
// job skips rather than waits; it returns their executions.
func TaskSkipBelowFloor(ctx context.Context, e Executor) ([]uuid.UUID, error) {
	ids, err := queries.TaskSkipBelowFloor(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error skipping tasks below their class's floor: %w", mapErr(err))
	}
	return ids, nil
}

// TaskCountBacklog returns the ready backlog by class and priority.
func TaskCountBacklog(ctx context.Context, e Executor) ([]axtype.Backlog, error) {
	rows, err := queries.TaskCountBacklog(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading the backlog: %w", mapErr(err))
	}
	out := make([]axtype.Backlog, len(rows))
	for i, r := range rows {
		out[i] = axtype.Backlog{Class: r.Class, Priority: int(r.Priority), Depth: r.Depth,
			OldestWait: time.Duration(r.OldestSeconds * float64(time.Second))}
	}
	return out, nil
}

// TaskConcurrencyWaiting reads, per concurrency scope, the keys at their
// limit with ready tasks waiting (metrics).
func TaskConcurrencyWaiting(ctx context.Context, e Executor) ([]axtype.ConcurrencyWaiting, error) {
	rows, err := queries.TaskConcurrencyWaiting(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading concurrency keys: %w", mapErr(err))
	}
	out := make([]axtype.ConcurrencyWaiting, len(rows))
	for i, r := range rows {
		out[i] = axtype.ConcurrencyWaiting{Scope: r.Scope, KeysAtLimit: r.KeysAtLimit, Waiting: r.Waiting}
	}
	return out, nil
}

// TaskLeaseAgentless takes attempt of an agentless task that is due, for a run
// of at most its timeout (the lease lasts grace longer); ErrNotFound when
// the task is not pending at that attempt or not due.
func TaskLeaseAgentless(ctx context.Context, e Executor, id uuid.UUID, attempt int, grace time.Duration) (*axtype.HTTPTask, error) {
	r, err := queries.TaskLeaseAgentless(ctx, e, dbsqlc.TaskLeaseAgentlessParams{ID: id, Attempt: int32(attempt), GraceSeconds: grace.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error leasing http task %s: %w", id, mapErr(err))
	}
	exec, err := executorConfigFromJSON(r.Executor)
	if err != nil {
		return nil, fmt.Errorf("http task %s: %w", id, err)
	}
	return &axtype.HTTPTask{ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
		ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
		TimeoutSeconds: int(r.TimeoutSeconds), Token: r.LeaseToken, Deadline: r.Deadline.UTC(), Executor: exec,
		JobName: r.JobName, Params: r.Params, ScheduledFor: r.ScheduledFor.UTC(), Priority: int(r.Priority),
		TraceParent: r.Traceparent, Secrets: secretList(r.Secret, r.PreviousSecret)}, nil
}

// TaskGetStatus returns where a task stands; ErrNotFound when it is gone.
func TaskGetStatus(ctx context.Context, e Executor, id uuid.UUID) (*axtype.HTTPTaskState, error) {
	r, err := queries.TaskGetStatus(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error reading task %s: %w", id, mapErr(err))
	}
	return &axtype.HTTPTaskState{State: axtype.TaskState(r.State), Attempt: int(r.Attempt), Agentless: r.Agentless, HTTP: r.Http,
		NotBefore: r.NotBefore.UTC(), Deadline: r.Deadline.UTC(), ExecutionID: r.ExecutionID,
		TimeoutSeconds: int(r.TimeoutSeconds), Priority: int(r.Priority),
		TokenWait: time.Duration(r.TokenWaitSeconds * float64(time.Second)), Now: r.Now.UTC()}, nil
}

// TaskCheckToken reports whether task id is an HTTP task (sent by ax
// serve or an agent) and token is its current completion token;
// ErrNotFound when no task has the id.
func TaskCheckToken(ctx context.Context, e Executor, id, token uuid.UUID) (httpTask, current bool, err error) {
	r, err := queries.TaskCheckToken(ctx, e, dbsqlc.TaskCheckTokenParams{Token: token, ID: id})
	if err != nil {
		return false, false, fmt.Errorf("error reading task %s: %w", id, mapErr(err))
	}
	return r.Http, r.Current, nil
}

// TaskAwaitTarget hands the HTTP tasks of refs, whose targets answered
// 202 to agent agentID, to their targets: they run on, held by no agent,
// until the target posts the result with the lease token or the reaper
// times them out grace after their deadline. It returns the tasks handed
// over, as running; the others (no longer this agent's lease, or not HTTP
// tasks) are unchanged.
func TaskAwaitTarget(ctx context.Context, e Executor, agentID uuid.UUID, refs []axtype.TaskRef, grace time.Duration) ([]axtype.CompletedTask, error) {
	p := dbsqlc.TaskAwaitTargetParams{AgentID: &agentID, GraceSeconds: grace.Seconds()}
	for _, r := range refs {
		p.TaskIds = append(p.TaskIds, r.ID)
		p.Tokens = append(p.Tokens, r.Token)
	}
	rows, err := queries.TaskAwaitTarget(ctx, e, p)
	if err != nil {
		return nil, fmt.Errorf("error handing tasks to their targets: %w", mapErr(err))
	}
	out := make([]axtype.CompletedTask, len(rows))
	for i, r := range rows {
		out[i] = axtype.CompletedTask{ID: r.ID, ExecutionID: r.ExecutionID, State: axtype.TaskRunning}
	}
	return out, nil
}

// TaskCancelAgentless ends agentless tasks whose execution was
// cancelled while their request was outstanding, and finalizes those
// executions.
func TaskCancelAgentless(ctx context.Context, e Executor) error {
	execs, err := queries.TaskCancelAgentless(ctx, e)
	if err != nil {
		return fmt.Errorf("error cancelling agentless tasks: %w", mapErr(err))
	}
	return ExecutionFinalize(ctx, e, execs)
}

// TaskGetPriorities returns the priorities of tasks by id.
func TaskGetPriorities(ctx context.Context, e Executor, ids []uuid.UUID) (map[uuid.UUID]int, error) {
	rows, err := queries.TaskGetPriorities(ctx, e, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading task priorities: %w", mapErr(err))
	}
	out := make(map[uuid.UUID]int, len(rows))
	for _, r := range rows {
		out[r.ID] = int(r.Priority)
	}
	return out, nil
}

// TaskGetHTTPTarget returns the job of a task and the URL its requests go to.
func TaskGetHTTPTarget(ctx context.Context, e Executor, taskID uuid.UUID) (jobID uuid.UUID, url string, err error) {
	r, err := queries.TaskGetHTTPTarget(ctx, e, taskID)
	if err != nil {
		return uuid.Nil, "", fmt.Errorf("error reading the target of http task %s: %w", taskID, mapErr(err))
	}
	return r.JobID, r.Url, nil
}
