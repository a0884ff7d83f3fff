package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// TaskListByExecution returns an execution's tasks in shard order, with
// the results and errors that fit in axtype.MaxListedResults and
// axtype.MaxListedResultBytes (Task.ResultOmitted says which do not).
func TaskListByExecution(ctx context.Context, e Executor, executionID uuid.UUID) ([]*axtype.Task, error) {
	return TaskListByExecutionFrom(ctx, e, executionID, 0)
}

// TaskListByExecutionFrom is TaskListByExecution listing results and
// errors from shard from on.
func TaskListByExecutionFrom(ctx context.Context, e Executor, executionID uuid.UUID, from int) ([]*axtype.Task, error) {
	rows, err := queries.TaskListByExecution(ctx, e, dbsqlc.TaskListByExecutionParams{ExecutionID: executionID,
		ShardsFrom: int32(max(from, 0)), MaxListed: axtype.MaxListedResults, MaxBytes: axtype.MaxListedResultBytes})
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
			CancelRequestedAt: utcPtr(r.CancelRequestedAt), Result: r.Result, Error: r.Error,
			ErrorCode: deref(r.ErrorCode), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
			ResultOmitted: r.Omitted,
		}
	}
	return out, nil
}

// TaskLeasePickParams is one pick of a lease (see the TaskLeasePick
// query): tasks for agents that share their labels, executor kinds and
// label binding. Who asks for how many, and in which order, is the
// caller's policy (queue/dispatch); this only runs the statement.
type TaskLeasePickParams struct {
	Labels     map[string]string
	Executors  []string // empty: DefaultExecutors
	LabelBound bool
	// AgentIDs[i] wants up to Maxes[i] tasks.
	AgentIDs []uuid.UUID
	Maxes    []int
	// StealAfter is how long a task routed to another agent waits before
	// these may take it (its runner-up first; anyone after three times as
	// long); StarveAfter how long a ready task waits before it is picked
	// ahead of higher priorities.
	StealAfter, StarveAfter time.Duration
	// Caps are the rate classes that may be picked, with at most how many
	// tasks each; classes not listed are not picked.
	Caps map[string]int
	// Taken are tasks picked already in this transaction: not picked again.
	Taken []uuid.UUID
	// LockKeys locks the concurrency keys of the keyed tasks picked, for
	// TaskLeaseTake to count them under; false when the transaction picks
	// again and locks them all at once after (TaskConcurrencyLock).
	LockKeys bool
	// NoShares picks as before pool shares (migration 00090): each pool's
	// read up to the whole room, and no keyed task. For a second pick,
	// when the first came short (TaskLeasePick's short).
	NoShares bool
	// Now, when set, replaces the database clock (tests); nil: now().
	Now *time.Time
}

// TaskLeasePick picks and locks pending tasks for p, in tx, in the order
// the query gives; TaskLeaseTake leases those handed out. short: the
// pick counted pool shares and came short of its room, maybe for tasks
// other leases hold; pick again with NoShares for what is left.
func TaskLeasePick(ctx context.Context, tx pgx.Tx, p *TaskLeasePickParams) (picked []axtype.LeaseCandidate, short bool, err error) {
	q, err := pickParams(p)
	if err != nil {
		return nil, false, err
	}
	rows, err := queries.TaskLeasePick(ctx, tx, q)
	if err != nil {
		return nil, false, fmt.Errorf("error picking tasks to lease: %w", mapErr(err))
	}
	picked = make([]axtype.LeaseCandidate, 0, len(rows))
	for _, r := range rows {
		if r.ID == uuid.Nil {
			short = true // a sign, not a task
			continue
		}
		picked = append(picked, axtype.LeaseCandidate{ID: r.ID, ExecutionID: r.ExecutionID, RateClass: r.RateClass,
			PreferredAgentID: r.PreferredAgentID, FallbackAgentID: r.FallbackAgentID, Steal: axtype.LeaseSteal(r.Steal),
			ConcurrencyKey: r.ConcurrencyKey, ConcurrencyScope: r.ConcurrencyScope, ConcurrencyLimit: int(r.ConcurrencyLimit),
			ParamsBytes: int(r.ParamsBytes)})
	}
	return picked, short, nil
}

func pickParams(p *TaskLeasePickParams) (dbsqlc.TaskLeasePickParams, error) {
	labels, err := json.Marshal(nonNilMap(p.Labels))
	if err != nil {
		return dbsqlc.TaskLeasePickParams{}, fmt.Errorf("error encoding agent labels: %w", err)
	}
	q := dbsqlc.TaskLeasePickParams{
		AgentLabels: labels, Executors: cmpSlice(p.Executors, axtype.DefaultExecutors), LabelBound: p.LabelBound,
		StealSeconds: p.StealAfter.Seconds(), StealAnySeconds: 3 * p.StealAfter.Seconds(),
		StarveSeconds: p.StarveAfter.Seconds(), Classes: []string{}, Caps: []int32{}, Now: p.Now,
		Taken: append([]uuid.UUID{}, p.Taken...), AgentIds: p.AgentIDs, Maxes: make([]int32, len(p.Maxes)),
		LockKeys: p.LockKeys, LockClass: concurrencyLockClass, NoShares: p.NoShares,
	}
	for i, n := range p.Maxes {
		q.Maxes[i] = int32(n)
		q.Max += int32(n)
	}
	for class, n := range p.Caps {
		q.Classes = append(q.Classes, class)
		q.Caps = append(q.Caps, int32(n))
	}
	return q, nil
}

// TaskLeaseTakeParams leases picked tasks: TaskIDs[i] to AgentIDs[i].
type TaskLeaseTakeParams struct {
	TaskIDs, AgentIDs []uuid.UUID
	// KeyNths[i] is TaskIDs[i]'s place among the tasks of its concurrency
	// key in TaskIDs (1, 2, ...), 0 without a key: a keyed task is leased
	// only while its key has room, counted under the key's lock (taken by
	// TaskLeasePick or TaskConcurrencyLock).
	KeyNths []int32
	// ExecutionIDs are the runs of those tasks, each once: they start.
	ExecutionIDs []uuid.UUID
	Lease        time.Duration
	// Now, when set, replaces the database clock (tests); nil: now().
	Now *time.Time
}

// TaskLeaseTake leases the tasks of p in tx, which picked them
// (TaskLeasePick). A task whose agent may no longer lease (drained since)
// is left out, and its run does not start.
func TaskLeaseTake(ctx context.Context, tx pgx.Tx, p *TaskLeaseTakeParams) ([]*axtype.LeasedTask, error) {
	rows, err := queries.TaskLeaseTake(ctx, tx, dbsqlc.TaskLeaseTakeParams{LeaseSeconds: p.Lease.Seconds(), Now: p.Now,
		TaskIds: p.TaskIDs, AgentIds: p.AgentIDs, ExecutionIds: p.ExecutionIDs, KeyNths: keyNths(p)})
	if err != nil {
		return nil, fmt.Errorf("error leasing tasks: %w", mapErr(err))
	}
	return leasedTasks(rows)
}

// keyNths is p.KeyNths, or zeros when it was not given.
func keyNths(p *TaskLeaseTakeParams) []int32 {
	if len(p.KeyNths) == len(p.TaskIDs) {
		return p.KeyNths
	}
	return make([]int32, len(p.TaskIDs))
}

// AgentsLeasable returns which of ids may lease now (active, see the
// query), in tx.
func AgentsLeasable(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) ([]uuid.UUID, error) {
	leasable, err := queries.AgentsLeasable(ctx, tx, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading which of %d agents may lease: %w", len(ids), mapErr(err))
	}
	return leasable, nil
}

// concurrencyLockClass is the first key of the advisory locks of
// concurrency keys (the two-int4 form, apart from the one-bigint locks of
// migrations): "ax" and this feature's migration number.
const concurrencyLockClass = 0x61780057

// TaskConcurrencyLock locks, in tx, the concurrency keys of the keyed
// tasks picked to be leased (all at once, in hash order: see the query),
// for TaskLeaseTake to count them under.
func TaskConcurrencyLock(ctx context.Context, tx pgx.Tx, keyed []axtype.LeaseCandidate) error {
	p := dbsqlc.TaskConcurrencyLockParams{LockClass: concurrencyLockClass}
	for _, c := range keyed {
		p.Scopes = append(p.Scopes, c.ConcurrencyScope)
		p.Keys = append(p.Keys, c.ConcurrencyKey)
	}
	if err := queries.TaskConcurrencyLock(ctx, tx, p); err != nil {
		return fmt.Errorf("error locking concurrency keys: %w", mapErr(err))
	}
	return nil
}

// ConcurrencyUnparkKeys bounds the freed-key records one unpark consumes:
// the rest wait for the next.
const ConcurrencyUnparkKeys = 1000

// TaskConcurrencyUnpark unparks the tasks waiting behind their key's limit
// that the places freed since the last call have room for, in a
// transaction of its own (e autocommits, or is a pool), and returns how
// many freed-key records it consumed (ConcurrencyUnparkKeys: maybe more).
// An unparked task is ready from now (nil: the database's clock), and
// leased in that order among its keys' ready tasks.
func TaskConcurrencyUnpark(ctx context.Context, e Executor, now *time.Time) (int, error) {
	n, err := queries.TaskConcurrencyUnpark(ctx, e, dbsqlc.TaskConcurrencyUnparkParams{
		LockClass: concurrencyLockClass, MaxKeys: ConcurrencyUnparkKeys, Now: now})
	if err != nil {
		return 0, fmt.Errorf("error unparking keyed tasks: %w", mapErr(err))
	}
	return int(n), nil
}

// NoAgentUnpark says how far a TaskNoAgentUnpark call went.
type NoAgentUnpark struct {
	// Jobs is how many jobs with parked tasks it looked at, LastJob the
	// last of them (id order).
	Jobs    int
	LastJob uuid.UUID
	// Unparked is how many tasks it unparked.
	Unparked int
}

// TaskNoAgentUnpark unparks the tasks parked for want of an agent
// (axtype.TaskRoute.NoAgent) whose jobs a live agent can take now: an
// agent heard from within live, by the router's rules. It looks at up to
// maxJobs jobs with parked tasks after job id after (uuid.Nil: from the
// first) and unparks at most maxTasks tasks; now nil is the database's
// clock.
func TaskNoAgentUnpark(ctx context.Context, e Executor, after uuid.UUID, maxJobs, maxTasks int, live time.Duration, now *time.Time) (NoAgentUnpark, error) {
	r, err := queries.TaskNoAgentUnpark(ctx, e, dbsqlc.TaskNoAgentUnparkParams{After: after, MaxJobs: int32(maxJobs),
		MaxTasks: int32(maxTasks), LiveSeconds: live.Seconds(), Now: now})
	if err != nil {
		return NoAgentUnpark{}, fmt.Errorf("error unparking tasks an agent can take: %w", mapErr(err))
	}
	return NoAgentUnpark{Jobs: int(r.Jobs), LastJob: r.LastJob, Unparked: int(r.Unparked)}, nil
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
	bad := badResultErrors(results, written)
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

// TaskFailPinnedOfOffline fails up to max pending tasks pinned to agents
// that went offline (error code axtype.ErrorCodeAgentOffline: no other
// agent may take them) and finalizes their runs; it returns how many runs
// it failed tasks of. now nil is the database's clock.
func TaskFailPinnedOfOffline(ctx context.Context, e Executor, max int, now *time.Time) (int, error) {
	execs, err := queries.TaskFailPinnedOfOffline(ctx, e, dbsqlc.TaskFailPinnedOfOfflineParams{Max: int32(max), Now: now})
	if err != nil {
		return 0, fmt.Errorf("error failing the tasks pinned to agents gone offline: %w", mapErr(err))
	}
	return len(execs), ExecutionFinalize(ctx, e, execs)
}

// PoolCatchUpWindow is how long after a job's pool changed the reaper
// moves its unfinished tasks again (TaskPoolCatchUp): longer than a fire's
// transaction that read the old pool.
const PoolCatchUpWindow = 30 * time.Second

// TaskPoolCatchUp moves to their job's pool the unfinished tasks of jobs
// whose pool changed within PoolCatchUpWindow (fires that raced the
// change), each at once and then at intervals doubling from its change,
// and returns how many it moved.
func TaskPoolCatchUp(ctx context.Context, e Executor) (int, error) {
	n, err := queries.TaskPoolCatchUp(ctx, e, PoolCatchUpWindow.Seconds())
	if err != nil {
		return 0, fmt.Errorf("error moving tasks to their job's new pool: %w", mapErr(err))
	}
	return int(n), nil
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
		out[r.ID] = &axtype.LeaseOutlook{State: axtype.AgentState(r.State), Ready: r.Ready,
			Next: time.Duration(r.Millis) * time.Millisecond, KeysFreed: r.KeysFreed}
	}
	return out, nil
}

// TaskSkipBelowFloor cancels up to max waiting tasks under their class's
// floor whose job skips rather than waits; it returns their executions.
func TaskSkipBelowFloor(ctx context.Context, e Executor, max int) ([]uuid.UUID, error) {
	ids, err := queries.TaskSkipBelowFloor(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error skipping tasks below their class's floor: %w", mapErr(err))
	}
	return ids, nil
}

// TaskFloorHold holds up to max waiting tasks below their class's floor
// out of every lease's and long poll's way (ax.task.floor_held), those of
// an automatic floor once it has been in force for settle, and returns
// how many it held. Tasks of jobs that skip are left to
// TaskSkipBelowFloor.
func TaskFloorHold(ctx context.Context, e Executor, max int, settle time.Duration) (int, error) {
	n, err := queries.TaskFloorHold(ctx, e, dbsqlc.TaskFloorHoldParams{SettleSeconds: settle.Seconds(), Max: int32(max)})
	if err != nil {
		return 0, fmt.Errorf("error holding tasks below their class's floor: %w", mapErr(err))
	}
	return int(n), nil
}

// TaskFloorRelease releases up to max held tasks their class's floor no
// longer turns away and returns how many it released.
func TaskFloorRelease(ctx context.Context, e Executor, max int) (int, error) {
	n, err := queries.TaskFloorRelease(ctx, e, int32(max))
	if err != nil {
		return 0, fmt.Errorf("error releasing tasks held below their class's floor: %w", mapErr(err))
	}
	return int(n), nil
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
