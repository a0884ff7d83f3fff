package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
)

// CallbackRef names one delivery of an execution's callback.
type CallbackRef struct {
	ExecutionID uuid.UUID
	Delivery    int
}

// CallbackTakeUnenqueued marks up to max outbox rows as enqueued and
// returns them, for the caller to insert their delivery jobs in the same
// transaction.
func CallbackTakeUnenqueued(ctx context.Context, e Executor, max int) ([]CallbackRef, error) {
	rows, err := queries.CallbackTakeUnenqueued(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error taking callbacks to enqueue: %w", mapErr(err))
	}
	out := make([]CallbackRef, len(rows))
	for i, r := range rows {
		out[i] = CallbackRef{ExecutionID: r.ExecutionID, Delivery: int(r.Delivery)}
	}
	return out, nil
}

// CallbackDelivery is what one delivery attempt needs.
type CallbackDelivery struct {
	ExecutionID, JobID uuid.UUID
	State              CallbackState // of the callback
	Delivery           int
	Attempts           int // made so far in this delivery
	// Sequence numbers the callback among its job's (gap-free from 1); 0
	// for a callback first made by a redelivery (the run ended while its
	// job had no callback URL).
	Sequence int64
	// WaitingFor is the execution of the earliest callback of the job
	// still pending before this one when the job's callbacks are ordered
	// ("": send now), and when that one's next attempt is due (nil: not
	// known, e.g. its first attempt is under way or its host's breaker
	// holds it).
	WaitingFor         string
	WaitingNextAttempt *time.Time
	URL                string // the job's callback URL now ("" when removed)
	JobName, JobGroup  string
	Secrets            []string // current first; the previous one while a rotation lasts

	Cause          ExecutionCause
	ExecutionState ExecutionState
	ScheduledFor   time.Time
	FiredAt        time.Time
	StartedAt      *time.Time
	FinishedAt     *time.Time
	Error          string // the execution's own error, or its cancel reason
	ShardCount     int
	Misfired       bool
	Params         json.RawMessage
	TraceParent    string // W3C trace context of the run ("" when none)
	// ShardCounts counts all shards by state; Shards lists the first ones
	// as JSON objects (index, param, state, attempts, result, error,
	// error_code, started_at, finished_at).
	ShardCounts map[string]int
	Shards      json.RawMessage
	// ShardErrorCodes counts the shards that ended without succeeding by
	// their error code (shards without a code are not counted).
	ShardErrorCodes map[string]int
}

// CallbackGetForDelivery returns the delivery state of an execution's
// callback with up to maxShards shards; ErrNotFound when there is none
// (the execution was deleted).
func CallbackGetForDelivery(ctx context.Context, e Executor, executionID uuid.UUID, maxShards int) (*CallbackDelivery, error) {
	r, err := queries.CallbackGetForDelivery(ctx, e, dbsqlc.CallbackGetForDeliveryParams{
		ExecutionID: executionID, MaxShards: int32(maxShards)})
	if err != nil {
		return nil, fmt.Errorf("error getting callback of execution %s: %w", executionID, mapErr(err))
	}
	d := &CallbackDelivery{ExecutionID: r.ExecutionID, JobID: r.JobID, State: CallbackState(r.State),
		Delivery: int(r.Delivery), Attempts: int(r.Attempts), Sequence: r.Sequence, WaitingFor: r.WaitingFor, WaitingNextAttempt: utcPtr(r.WaitingNextAttemptAt), URL: r.Url, JobName: r.JobName, JobGroup: r.GroupName,
		Cause: ExecutionCause(r.Cause), ExecutionState: ExecutionState(r.ExecutionState), ScheduledFor: r.ScheduledFor.UTC(),
		FiredAt: r.FiredAt.UTC(), StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt),
		Error: deref(r.ExecutionError), ShardCount: int(r.ShardCount), Misfired: r.Misfired, Params: r.Params,
		TraceParent: r.Traceparent, Shards: r.Shards}
	if d.Error == "" {
		d.Error = deref(r.CancelReason)
	}
	d.Secrets = secretList(r.Secret, r.PreviousSecret)
	if err := json.Unmarshal(r.ShardCounts, &d.ShardCounts); err != nil {
		return nil, fmt.Errorf("error decoding shard counts of execution %s: %w", executionID, err)
	}
	if err := json.Unmarshal(r.ShardErrorCodes, &d.ShardErrorCodes); err != nil {
		return nil, fmt.Errorf("error decoding shard error codes of execution %s: %w", executionID, err)
	}
	return d, nil
}

func secretList(current, previous string) []string {
	var out []string
	for _, s := range []string{current, previous} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// CallbackAttemptRecord is one delivery attempt and where the callback
// goes after it.
type CallbackAttemptRecord struct {
	CallbackRef
	Attempt    int
	URL        string
	At         time.Time
	StatusCode int // 0: no answer
	Latency    time.Duration
	Error      string
	// Then is the callback's state afterwards; NextAttemptAt is set when it
	// stays pending.
	Then          CallbackState
	NextAttemptAt *time.Time
}

// CallbackRecordAttempt stores an attempt and moves its callback on; it
// returns ErrNotFound when the delivery was superseded (redelivered).
func CallbackRecordAttempt(ctx context.Context, e Executor, r *CallbackAttemptRecord) error {
	var status *int32
	if r.StatusCode != 0 {
		s := int32(r.StatusCode)
		status = &s
	}
	_, err := queries.CallbackRecordAttempt(ctx, e, dbsqlc.CallbackRecordAttemptParams{
		ExecutionID: r.ExecutionID, Delivery: int32(r.Delivery), Attempt: int32(r.Attempt), Url: r.URL, At: r.At,
		StatusCode: status, LatencyMs: float64(r.Latency.Microseconds()) / 1000, Error: r.Error,
		State: dbsqlc.AxCallbackState(r.Then), NextAttemptAt: r.NextAttemptAt,
	})
	if err != nil {
		return fmt.Errorf("error recording callback attempt of execution %s: %w", r.ExecutionID, mapErr(err))
	}
	return nil
}

// CallbackGiveUp fails a delivery without an attempt, saying why.
func CallbackGiveUp(ctx context.Context, e Executor, ref CallbackRef, reason string) error {
	_, err := queries.CallbackGiveUp(ctx, e, dbsqlc.CallbackGiveUpParams{
		ExecutionID: ref.ExecutionID, Delivery: int32(ref.Delivery), Error: reason})
	if err != nil {
		return fmt.Errorf("error failing callback of execution %s: %w", ref.ExecutionID, mapErr(err))
	}
	return nil
}

// CallbackRedeliver starts a new delivery of an ended execution's
// callback; ErrNotFound when the execution has not ended or its job has no
// callback URL.
func CallbackRedeliver(ctx context.Context, e Executor, executionID uuid.UUID) (CallbackRef, error) {
	r, err := queries.CallbackRedeliver(ctx, e, executionID)
	if err != nil {
		return CallbackRef{}, fmt.Errorf("error redelivering callback of execution %s: %w", executionID, mapErr(err))
	}
	return CallbackRef{ExecutionID: r.ExecutionID, Delivery: int(r.Delivery)}, nil
}

// Callback is the delivery state of an execution's callback.
type Callback struct {
	ExecutionID   uuid.UUID
	State         CallbackState
	Delivery      int
	Attempts      int
	LastStatus    int
	LastError     string
	NextAttemptAt *time.Time
	DeliveredAt   *time.Time
	FailedAt      *time.Time
	CreatedAt     time.Time
	History       []CallbackAttempt // oldest first
}

// CallbackGet returns an execution's callback with its last maxAttempts
// attempts, or nil when it has none.
func CallbackGet(ctx context.Context, e Executor, executionID uuid.UUID, maxAttempts int) (*Callback, error) {
	r, err := queries.CallbackGet(ctx, e, executionID)
	if errors.Is(mapErr(err), ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error getting callback of execution %s: %w", executionID, mapErr(err))
	}
	c := &Callback{ExecutionID: r.ExecutionID, State: CallbackState(r.State), Delivery: int(r.Delivery),
		Attempts: int(r.Attempts), LastStatus: int(deref(r.LastStatus)), LastError: deref(r.LastError),
		NextAttemptAt: utcPtr(r.NextAttemptAt), DeliveredAt: utcPtr(r.DeliveredAt), FailedAt: utcPtr(r.FailedAt),
		CreatedAt: r.CreatedAt.UTC()}
	if c.History, err = callbackAttemptList(ctx, e, executionID, maxAttempts); err != nil {
		return nil, err
	}
	return c, nil
}
