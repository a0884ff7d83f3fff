package db

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// Task is one shard of an execution.
type Task struct {
	ID                uuid.UUID
	ExecutionID       uuid.UUID
	JobID             uuid.UUID
	ShardIndex        int
	ShardTotal        int
	ShardParam        string
	State             TaskState
	Priority          int
	Attempt           int
	MaxAttempts       int
	LostLeases        int // leases lost with their agent: runs again that used up no attempt
	TimeoutSeconds    int
	NotBefore         time.Time
	AgentID           *uuid.UUID // the agent of the last lease (nil: never leased, or sent by ax itself)
	LeasedAt          *time.Time // the last attempt's lease
	StartedAt         *time.Time // the last attempt's first heartbeat: nil when it ended before one
	FinishedAt        *time.Time
	CancelRequestedAt *time.Time
	Result            json.RawMessage
	Error             string
	ErrorCode         string // "" when the outcome carried none (see MaxErrorCodeLength)
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// TaskListByExecution returns an execution's tasks in shard order.
func TaskListByExecution(ctx context.Context, e Executor, executionID uuid.UUID) ([]*Task, error) {
	rows, err := queries.TaskListByExecution(ctx, e, executionID)
	if err != nil {
		return nil, fmt.Errorf("error listing tasks of execution %s: %w", executionID, mapErr(err))
	}
	out := make([]*Task, len(rows))
	for i, r := range rows {
		out[i] = &Task{
			ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
			ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, State: TaskState(r.State),
			Priority: int(r.Priority), Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
			LostLeases: int(r.LostLeases), TimeoutSeconds: int(r.TimeoutSeconds), NotBefore: r.NotBefore.UTC(),
			AgentID: r.AgentID, LeasedAt: utcPtr(r.LeasedAt), StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt),
			CancelRequestedAt: utcPtr(r.CancelRequestedAt), Result: r.Result, Error: deref(r.Error),
			ErrorCode: deref(r.ErrorCode), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		}
	}
	return out, nil
}

// NewTask is a task just made, with what routing needs to place it.
type NewTask struct {
	ID, ExecutionID, JobID uuid.UUID
	JobName, JobGroup      string
	ShardIndex, ShardTotal int
	ShardParam             string
	Pinned                 bool // a broadcast task, made for one agent
	Agentless              bool // an HTTP task ax serve sends itself; agents never lease it
	RouteStrategy          RouteStrategy
	ExecutorKind           ExecutorKind // shell, http or handler: only agents accepting it are routed to
	RouteKey               string       // the job's template
	TargetLabels           map[string]string
	Params                 json.RawMessage
}

// TaskRoute is one routing decision; nil agent ids mean no preference.
type TaskRoute struct {
	TaskID              uuid.UUID
	Preferred, Fallback uuid.UUID
	RouteKey            string
}

// RouteFunc decides the preferred agents of new tasks before they are
// written (ExecutionInsertMany): a route per routed task; a task without
// one is unassigned, any matching agent may take it.
type RouteFunc func(ctx context.Context, tasks []*NewTask) ([]TaskRoute, error)

// LeasedTask is a task handed to an agent, with what running it needs.
type LeasedTask struct {
	ID             uuid.UUID
	ExecutionID    uuid.UUID
	JobID          uuid.UUID
	ShardIndex     int
	ShardTotal     int
	ShardParam     string
	Attempt        int
	MaxAttempts    int
	TimeoutSeconds int
	LeaseToken     uuid.UUID
	LeaseExpiresAt time.Time
	// Deadline is when the attempt times out at the earliest: its lease
	// plus its timeout (the reaper counts from the first heartbeat).
	Deadline     time.Time
	ExecutorKind ExecutorKind
	Executor     ExecutorConfig
	Params       json.RawMessage
	ScheduledFor time.Time
	JobName      string
	JobGroup     string
	RoutedHere   bool          // the task was routed to this agent (or unassigned)
	ReadyAt      time.Time     // when it became leasable
	Waited       time.Duration // from ReadyAt to its lease, by the database clock: pickup latency
	RateClass    string
	Priority     int
	TraceParent  string // the run's W3C trace context
	// Secrets are the job's signing secrets (current first), for an HTTP
	// task: set by the lease broker, never logged.
	Secrets []string
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
func TaskLease(ctx context.Context, b TxBeginner, p *TaskLeaseParams) ([]*LeasedTask, error) {
	out, err := TaskLeaseMany(ctx, b, &TaskLeaseBatch{
		Agents: []LeaseAgent{{ID: p.AgentID, Labels: p.AgentLabels, Executors: p.AgentExecutors,
			LabelBound: p.AgentLabelBound, Max: p.Max}},
		Lease: p.Lease, StealAfter: p.StealAfter, StarveAfter: p.StarveAfter, Grants: p.Grants, Now: p.Now})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// LeaseAgent is one agent's ask in a TaskLeaseBatch.
type LeaseAgent struct {
	ID         uuid.UUID
	Labels     map[string]string
	Executors  []string // empty: DefaultExecutors
	LabelBound bool
	Max        int
}

// TaskLeaseBatch asks for tasks for several agents at once (see
// TaskLeaseParams for the settings they share).
type TaskLeaseBatch struct {
	Agents                         []LeaseAgent
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
func TaskLeaseMany(ctx context.Context, b TxBeginner, batch *TaskLeaseBatch) ([][]*LeasedTask, error) {
	total := 0
	for _, a := range batch.Agents {
		total += a.Max
	}
	out := make([][]*LeasedTask, len(batch.Agents))
	err := withBatchTx(ctx, b, total, func(tx pgx.Tx) error {
		take := dbsqlc.TaskLeaseTakeParams{LeaseSeconds: batch.Lease.Seconds(), Now: batch.Now}
		runs := map[uuid.UUID]bool{}
		h := newLeaseHand(batch)
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
					if !runs[r.ExecutionID] {
						runs[r.ExecutionID] = true
						take.ExecutionIds = append(take.ExecutionIds, r.ExecutionID)
					}
				}
			}
		}
		if len(take.TaskIds) == 0 {
			return nil
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
func leaseGroups(agents []LeaseAgent) [][]int {
	var groups [][]int
	for i, a := range agents {
		found := false
		for g, group := range groups {
			first := agents[group[0]]
			if first.LabelBound == a.LabelBound && maps.Equal(first.Labels, a.Labels) &&
				slices.Equal(cmpSlice(first.Executors, DefaultExecutors), cmpSlice(a.Executors, DefaultExecutors)) {
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
	owner  map[uuid.UUID]int // task → index of the agent it was handed to
}

func newLeaseHand(batch *TaskLeaseBatch) *leaseHand {
	h := &leaseHand{batch: batch, room: make([]int, len(batch.Agents)), grants: maps.Clone(batch.Grants),
		owner: map[uuid.UUID]int{}}
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
		AgentLabels: labels, Executors: cmpSlice(first.Executors, DefaultExecutors), LabelBound: first.LabelBound,
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

func leasedTasks(rows []dbsqlc.TaskLeaseTakeRow) ([]*LeasedTask, error) {
	out := make([]*LeasedTask, len(rows))
	for i, r := range rows {
		exec, err := executorConfigFromJSON(r.Executor)
		if err != nil {
			return nil, fmt.Errorf("job %s: %w", r.JobID, err)
		}
		out[i] = &LeasedTask{ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
			ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, Attempt: int(r.Attempt),
			MaxAttempts: int(r.MaxAttempts), TimeoutSeconds: int(r.TimeoutSeconds), LeaseToken: r.LeaseToken,
			LeaseExpiresAt: r.LeaseExpiresAt.UTC(), Deadline: r.Deadline.UTC(), ExecutorKind: ExecutorKind(r.ExecutorKind),
			Executor: exec, Params: r.Params, ScheduledFor: r.ScheduledFor.UTC(), JobName: r.JobName, JobGroup: r.GroupName,
			RoutedHere: r.RoutedHere, ReadyAt: r.ReadyAt.UTC(),
			Waited: time.Duration(r.WaitedSeconds * float64(time.Second)), RateClass: r.RateClass, Priority: int(r.Priority),
			TraceParent: r.Traceparent}
	}
	return out, nil
}

// TaskRef names a leased task with its fencing token.
type TaskRef struct {
	ID    uuid.UUID
	Token uuid.UUID
}

func splitRefs(refs []TaskRef) (ids, tokens []uuid.UUID) {
	ids, tokens = make([]uuid.UUID, len(refs)), make([]uuid.UUID, len(refs))
	for i, r := range refs {
		ids[i], tokens[i] = r.ID, r.Token
	}
	return ids, tokens
}

// RenewedTask is a lease a heartbeat extended.
type RenewedTask struct {
	ID             uuid.UUID
	Cancel         bool // the agent should stop it (cancelled or timed out)
	LeaseExpiresAt time.Time
}

// TaskRenew extends the agent's current leases among refs; now, when set,
// replaces the database clock (tests).
func TaskRenew(ctx context.Context, e Executor, agentID uuid.UUID, refs []TaskRef, lease time.Duration, now *time.Time) ([]RenewedTask, error) {
	ids, tokens := splitRefs(refs)
	rows, err := queries.TaskRenew(ctx, e, dbsqlc.TaskRenewParams{
		TaskIds: ids, Tokens: tokens, AgentID: &agentID, LeaseSeconds: lease.Seconds(), Now: now,
	})
	if err != nil {
		return nil, fmt.Errorf("error renewing leases of agent %s: %w", agentID, mapErr(err))
	}
	out := make([]RenewedTask, len(rows))
	for i, r := range rows {
		out[i] = RenewedTask{ID: r.ID, Cancel: r.Cancel, LeaseExpiresAt: r.LeaseExpiresAt.UTC()}
	}
	return out, nil
}

// TaskResult is an outcome reported by an agent.
type TaskResult struct {
	TaskRef
	State  TaskState // succeeded, failed or cancelled
	Result json.RawMessage
	Error  string
	// ErrorCode is the outcome's machine-readable reason ("" for none):
	// exit_3, signal_killed, http_503, connect, timeout… It must pass
	// queue.ValidErrorCode; the database refuses anything else.
	ErrorCode string
}

// CompletedTask is a result that was recorded; State is the task's state
// afterwards (pending when a failure will be retried).
type CompletedTask struct {
	ID          uuid.UUID
	ExecutionID uuid.UUID
	State       TaskState
	ErrorCode   string // as recorded ("" for none)
	// Error is the reason of an ErrorCodeBadResult ("" otherwise).
	Error string
	// Finalized is true when this result ended its execution.
	Finalized bool
}

// TaskComplete records results with current tokens; the others match
// nothing. Executions whose tasks all ended are finalized in the same call.
// It is for results ax reports itself (agentless HTTP tasks); agents'
// results go through TaskCompleteByAgent.
func TaskComplete(ctx context.Context, e Executor, results []TaskResult) ([]CompletedTask, error) {
	return taskComplete(ctx, e, make([]uuid.UUID, len(results)), results, nil) // uuid.Nil: no agent
}

// TaskCompleteByAgent is TaskComplete for results reported by an agent:
// a result of a task whose lease another agent holds matches nothing,
// even with the current token. now, when set, replaces the database clock
// a retry's backoff counts from (tests).
func TaskCompleteByAgent(ctx context.Context, e Executor, agentID uuid.UUID, results []TaskResult, now *time.Time) ([]CompletedTask, error) {
	agents := make([]uuid.UUID, len(results))
	for i := range agents {
		agents[i] = agentID
	}
	return taskComplete(ctx, e, agents, results, now)
}

// TaskCompleteByAgents is TaskCompleteByAgent for results of several
// agents at once: agents[i] reports results[i]. A task's results must all
// come from one agent (the first of a task's results is the one counted).
func TaskCompleteByAgents(ctx context.Context, e Executor, agents []uuid.UUID, results []TaskResult, now *time.Time) ([]CompletedTask, error) {
	if len(agents) != len(results) {
		return nil, fmt.Errorf("error completing tasks: %d agents for %d results", len(agents), len(results))
	}
	return taskComplete(ctx, e, agents, results, now)
}

func taskComplete(ctx context.Context, e Executor, agents []uuid.UUID, results []TaskResult, now *time.Time) ([]CompletedTask, error) {
	// The results that end runs are locked by one statement and written by
	// the next: both in one transaction, the caller's or one of our own.
	if _, inTx := e.(pgx.Tx); !inTx {
		if b, ok := e.(TxBeginner); ok {
			return WithTxV(ctx, b, func(tx pgx.Tx) ([]CompletedTask, error) {
				return taskComplete(ctx, tx, agents, results, now)
			})
		}
	}
	rows, written, err := taskCompleteRows(ctx, e, agents, storableResults(results), now)
	if err != nil {
		return nil, fmt.Errorf("error completing tasks: %w", mapErr(err))
	}
	out := make([]CompletedTask, len(rows))
	var single dbsqlc.ExecutionEndSingleParams
	var several []uuid.UUID
	for i, r := range rows {
		out[i] = CompletedTask{ID: r.ID, ExecutionID: r.ExecutionID, State: TaskState(r.State), ErrorCode: r.ErrorCode}
		switch {
		case r.EndsRun: // its outcome is written with its run (see TaskComplete)
			single.Ids = append(single.Ids, r.ExecutionID)
			single.States = append(single.States, r.State)
			single.TaskIds = append(single.TaskIds, r.ID)
			single.Results = append(single.Results, []byte(r.Result))
			single.Errors = append(single.Errors, r.Error)
			single.ErrorCodes = append(single.ErrorCodes, r.ErrorCode)
		case TaskState(r.State) == TaskPending: // a retry cannot end its execution
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
func TaskRelease(ctx context.Context, e Executor, agentID uuid.UUID, refs []TaskRef) ([]uuid.UUID, error) {
	ids, tokens := splitRefs(refs)
	released, err := queries.TaskRelease(ctx, e, dbsqlc.TaskReleaseParams{TaskIds: ids, Tokens: tokens, AgentID: &agentID})
	if err != nil {
		return nil, fmt.Errorf("error releasing leases of agent %s: %w", agentID, mapErr(err))
	}
	return released, nil
}

// LogChunk is output of a task.
type LogChunk struct {
	TaskRef
	Stream string
	Data   string
}

// TaskLogAppendParams are chunks to store and the per-task cap.
type TaskLogAppendParams struct {
	// AgentID is the caller: only tasks whose lease it holds take chunks.
	AgentID uuid.UUID
	Chunks  []LogChunk
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

// Reaped counts what one reaper sweep did.
type Reaped struct {
	Expired  int // leases that ran out (agent dead or partitioned)
	TimedOut int // tasks past their timeout
	Retried  int // of both, tasks pending again (another attempt, or the same after a lost lease)
	Lost     int // of the expired, leases lost with their agent (offline or silent)
	LostOut  int // of the lost, tasks failed because their lost leases reached the cap
}

// ReapPolicy says how TaskReapExpired judges what it reaps.
type ReapPolicy struct {
	// Max bounds the tasks one call reaps.
	Max int
	// SilentFor is how long an agent not yet offline must have been
	// silent for its expired leases to count as lost with it (a lease).
	SilentFor time.Duration
	// MaxLostLeases is the lost lease that fails a task (error "lost: …")
	// instead of running it again on the same attempt.
	MaxLostLeases int
	// TimeoutGrace is how long past its timeout a task an agent holds is
	// left to its agent, which stops it and reports timed_out itself.
	TimeoutGrace time.Duration
	// Now, when set, replaces the database clock (tests).
	Now *time.Time
}

// TaskReapExpired ends up to p.Max expired leases and overdue tasks and
// finalizes the executions that ended with them. A lease lost with its
// agent runs again without using up an attempt, up to p.MaxLostLeases
// (see the query).
func TaskReapExpired(ctx context.Context, e Executor, p ReapPolicy) (Reaped, error) {
	rows, err := queries.TaskReapExpired(ctx, e, dbsqlc.TaskReapExpiredParams{Max: int32(p.Max), Now: p.Now,
		SilentSeconds: p.SilentFor.Seconds(), MaxLostLeases: int32(p.MaxLostLeases),
		TimeoutGraceSeconds: p.TimeoutGrace.Seconds()})
	if err != nil {
		return Reaped{}, fmt.Errorf("error reaping expired leases: %w", mapErr(err))
	}
	var r Reaped
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

// LeaseOutlook is what a waiting long poll needs to know of its agent.
type LeaseOutlook struct {
	State AgentState // the agent's state now
	Ready bool       // whether it said it takes work
	// Next is how long until the earliest task it could lease becomes
	// leasable: labels, routing, steal delays, class floors and tokens
	// considered (an hour when none).
	Next time.Duration
}

// TaskNextLeasable reads the state of each agent of agentIDs and how long
// until it could lease a task, in one statement; an agent not found is
// left out. now, when set, replaces the database clock (tests).
func TaskNextLeasable(ctx context.Context, e Executor, agentIDs []uuid.UUID, stealAfter time.Duration, now *time.Time) (map[uuid.UUID]*LeaseOutlook, error) {
	rows, err := queries.TaskNextLeasable(ctx, e, dbsqlc.TaskNextLeasableParams{AgentIds: agentIDs, Now: now,
		StealSeconds: stealAfter.Seconds(), StealAnySeconds: 3 * stealAfter.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error finding the next task %d agents could lease: %w", len(agentIDs), mapErr(err))
	}
	out := make(map[uuid.UUID]*LeaseOutlook, len(rows))
	for _, r := range rows {
		out[r.ID] = &LeaseOutlook{State: AgentState(r.State), Ready: r.Ready, Next: time.Duration(r.Millis) * time.Millisecond}
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

// Backlog is the ready pending tasks of one rate class ("" for none) and
// priority.
type Backlog struct {
	Class      string
	Priority   int
	Depth      int64
	OldestWait time.Duration
}

// TaskCountBacklog returns the ready backlog by class and priority.
func TaskCountBacklog(ctx context.Context, e Executor) ([]Backlog, error) {
	rows, err := queries.TaskCountBacklog(ctx, e)
	if err != nil {
		return nil, fmt.Errorf("error reading the backlog: %w", mapErr(err))
	}
	out := make([]Backlog, len(rows))
	for i, r := range rows {
		out[i] = Backlog{Class: r.Class, Priority: int(r.Priority), Depth: r.Depth,
			OldestWait: time.Duration(r.OldestSeconds * float64(time.Second))}
	}
	return out, nil
}

// HTTPTask is an agentless HTTP task leased by ax serve, with what its
// request needs.
type HTTPTask struct {
	ID, ExecutionID, JobID uuid.UUID
	ShardIndex, ShardTotal int
	ShardParam             string
	Attempt, MaxAttempts   int
	TimeoutSeconds         int
	// Token fences the result: it is the completion token a target that
	// answers 202 sends back.
	Token        uuid.UUID
	Deadline     time.Time // by the database clock
	Executor     ExecutorConfig
	JobName      string
	Params       json.RawMessage
	ScheduledFor time.Time
	Priority     int
	TraceParent  string   // W3C trace context of the run ("" when none)
	Secrets      []string // current first
}

// TaskLeaseAgentless takes attempt of an agentless task that is due, for a run
// of at most its timeout (the lease lasts grace longer); ErrNotFound when
// the task is not pending at that attempt or not due.
func TaskLeaseAgentless(ctx context.Context, e Executor, id uuid.UUID, attempt int, grace time.Duration) (*HTTPTask, error) {
	r, err := queries.TaskLeaseAgentless(ctx, e, dbsqlc.TaskLeaseAgentlessParams{ID: id, Attempt: int32(attempt), GraceSeconds: grace.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error leasing http task %s: %w", id, mapErr(err))
	}
	exec, err := executorConfigFromJSON(r.Executor)
	if err != nil {
		return nil, fmt.Errorf("http task %s: %w", id, err)
	}
	return &HTTPTask{ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
		ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
		TimeoutSeconds: int(r.TimeoutSeconds), Token: r.LeaseToken, Deadline: r.Deadline.UTC(), Executor: exec,
		JobName: r.JobName, Params: r.Params, ScheduledFor: r.ScheduledFor.UTC(), Priority: int(r.Priority),
		TraceParent: r.Traceparent, Secrets: secretList(r.Secret, r.PreviousSecret)}, nil
}

// HTTPTaskState is where a task stands, by the database clock.
type HTTPTaskState struct {
	State     TaskState
	Attempt   int
	Agentless bool
	// HTTP: a task of an http job, sent by ax serve (agentless) or by an
	// agent; its target may post its result with the lease token.
	HTTP           bool
	NotBefore      time.Time
	Deadline       time.Time // meaningful while leased or running
	ExecutionID    uuid.UUID
	TimeoutSeconds int
	Priority       int
	// TokenWait is how long until its rate class has a token (0: it has
	// one, or the task has no class).
	TokenWait time.Duration
	Now       time.Time
}

// TaskGetStatus returns where a task stands; ErrNotFound when it is gone.
func TaskGetStatus(ctx context.Context, e Executor, id uuid.UUID) (*HTTPTaskState, error) {
	r, err := queries.TaskGetStatus(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error reading task %s: %w", id, mapErr(err))
	}
	return &HTTPTaskState{State: TaskState(r.State), Attempt: int(r.Attempt), Agentless: r.Agentless, HTTP: r.Http,
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
func TaskAwaitTarget(ctx context.Context, e Executor, agentID uuid.UUID, refs []TaskRef, grace time.Duration) ([]CompletedTask, error) {
	p := dbsqlc.TaskAwaitTargetParams{AgentID: &agentID, GraceSeconds: grace.Seconds()}
	for _, r := range refs {
		p.TaskIds = append(p.TaskIds, r.ID)
		p.Tokens = append(p.Tokens, r.Token)
	}
	rows, err := queries.TaskAwaitTarget(ctx, e, p)
	if err != nil {
		return nil, fmt.Errorf("error handing tasks to their targets: %w", mapErr(err))
	}
	out := make([]CompletedTask, len(rows))
	for i, r := range rows {
		out[i] = CompletedTask{ID: r.ID, ExecutionID: r.ExecutionID, State: TaskRunning}
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
