package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

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
	Executor     json.RawMessage
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
	return &HTTPTask{ID: r.ID, ExecutionID: r.ExecutionID, JobID: r.JobID, ShardIndex: int(r.ShardIndex),
		ShardTotal: int(r.ShardTotal), ShardParam: r.ShardParam, Attempt: int(r.Attempt), MaxAttempts: int(r.MaxAttempts),
		TimeoutSeconds: int(r.TimeoutSeconds), Token: r.LeaseToken, Deadline: r.Deadline.UTC(), Executor: r.Executor,
		JobName: r.JobName, Params: r.Params, ScheduledFor: r.ScheduledFor.UTC(), Priority: int(r.Priority),
		TraceParent: r.Traceparent, Secrets: secretList(r.Secret, r.PreviousSecret)}, nil
}

// HTTPTaskState is where a task stands, by the database clock.
type HTTPTaskState struct {
	State          string
	Attempt        int
	Agentless      bool
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
	return &HTTPTaskState{State: r.State, Attempt: int(r.Attempt), Agentless: r.Agentless,
		NotBefore: r.NotBefore.UTC(), Deadline: r.Deadline.UTC(), ExecutionID: r.ExecutionID,
		TimeoutSeconds: int(r.TimeoutSeconds), Priority: int(r.Priority),
		TokenWait: time.Duration(r.TokenWaitSeconds * float64(time.Second)), Now: r.Now.UTC()}, nil
}

// TaskCheckToken reports whether task id is agentless and token is its
// current completion token; ErrNotFound when no task has the id.
func TaskCheckToken(ctx context.Context, e Executor, id, token uuid.UUID) (agentless, current bool, err error) {
	r, err := queries.TaskCheckToken(ctx, e, dbsqlc.TaskCheckTokenParams{Token: token, ID: id})
	if err != nil {
		return false, false, fmt.Errorf("error reading task %s: %w", id, mapErr(err))
	}
	return r.Agentless, r.Current, nil
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

// ExecutionLock locks an execution until the transaction ends:
// results of its shards recorded concurrently then see each other, so the
// last one ends the execution.
func ExecutionLock(ctx context.Context, e Executor, executionID uuid.UUID) error {
	if err := queries.ExecutionLock(ctx, e, executionID); err != nil {
		return fmt.Errorf("error locking execution %s: %w", executionID, mapErr(err))
	}
	return nil
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

// HTTPTaskSlot asks for a slot for one request of an agentless task: at
// most MaxPerJob of a job's and MaxPerHost of a host's requests are in
// flight at once, across replicas.
type HTTPTaskSlot struct {
	TaskID     uuid.UUID
	Attempt    int
	JobID      uuid.UUID
	Host       string
	MaxPerJob  int
	MaxPerHost int
	// Hold bounds the slot if its worker dies: after it, the slot counts
	// for nothing.
	Hold time.Duration
}

// HTTPTaskSlotOutcome says what a slot take found: whether the attempt was
// due (pending, not before now), whether its job and host had room, and
// whether the slot was taken.
type HTTPTaskSlotOutcome struct {
	Due, Room, Taken bool
}

// HTTPTaskSlotTake takes a slot in tx when the attempt is due and its job
// and host have room; the slot is held until HTTPTaskSlotRelease (or Hold
// passes). Takes of one job and one host are serialized by advisory locks
// held until tx ends, so the caps are exact.
func HTTPTaskSlotTake(ctx context.Context, e Executor, s *HTTPTaskSlot) (*HTTPTaskSlotOutcome, error) {
	if err := queries.HTTPTaskSlotLock(ctx, e, dbsqlc.HTTPTaskSlotLockParams{JobID: s.JobID, Host: s.Host}); err != nil {
		return nil, fmt.Errorf("error locking http task slots of job %s: %w", s.JobID, mapErr(err))
	}
	r, err := queries.HTTPTaskSlotTake(ctx, e, dbsqlc.HTTPTaskSlotTakeParams{TaskID: s.TaskID, Attempt: int32(s.Attempt),
		JobID: s.JobID, Host: s.Host, MaxPerJob: int32(s.MaxPerJob), MaxPerHost: int32(s.MaxPerHost),
		HoldSeconds: s.Hold.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("error taking an http task slot for task %s: %w", s.TaskID, mapErr(err))
	}
	return &HTTPTaskSlotOutcome{Due: r.Due, Room: r.Room, Taken: r.Taken}, nil
}

// HTTPTaskSlotRelease frees a task's slot.
func HTTPTaskSlotRelease(ctx context.Context, e Executor, taskID uuid.UUID) error {
	if err := queries.HTTPTaskSlotRelease(ctx, e, taskID); err != nil {
		return fmt.Errorf("error releasing the http task slot of task %s: %w", taskID, mapErr(err))
	}
	return nil
}

// HTTPTaskSlotDeleteExpired deletes slots whose worker died.
func HTTPTaskSlotDeleteExpired(ctx context.Context, e Executor) (int64, error) {
	n, err := queries.HTTPTaskSlotDeleteExpired(ctx, e)
	if err != nil {
		return 0, fmt.Errorf("error deleting expired http task slots: %w", mapErr(err))
	}
	return n, nil
}
