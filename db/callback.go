package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// CallbackTakeUnenqueued marks up to max outbox rows as enqueued and
// returns them, for the caller to insert their delivery jobs in the same
// transaction.
func CallbackTakeUnenqueued(ctx context.Context, e Executor, max int) ([]axtype.CallbackRef, error) {
	rows, err := queries.CallbackTakeUnenqueued(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error taking callbacks to enqueue: %w", mapErr(err))
	}
	out := make([]axtype.CallbackRef, len(rows))
	for i, r := range rows {
		out[i] = axtype.CallbackRef{ExecutionID: r.ExecutionID, Delivery: int(r.Delivery)}
	}
	return out, nil
}

// CallbackGetForDelivery returns the delivery state of an execution's
// callback with up to maxShards shards; ErrNotFound when there is none
// (the execution was deleted).
func CallbackGetForDelivery(ctx context.Context, e Executor, executionID uuid.UUID, maxShards int, maxShardBytes int64) (*axtype.CallbackDelivery, error) {
	r, err := queries.CallbackGetForDelivery(ctx, e, dbsqlc.CallbackGetForDeliveryParams{
		ExecutionID: executionID, MaxShards: int32(maxShards), MaxShardBytes: maxShardBytes})
	if err != nil {
		return nil, fmt.Errorf("error getting callback of execution %s: %w", executionID, mapErr(err))
	}
	d := &axtype.CallbackDelivery{ExecutionID: r.ExecutionID, JobID: r.JobID, State: axtype.CallbackState(r.State),
		Delivery: int(r.Delivery), Attempts: int(r.Attempts), Sequence: r.Sequence, WaitingFor: r.WaitingFor, WaitingNextAttempt: utcPtr(r.WaitingNextAttemptAt), URL: r.Url, JobName: r.JobName, JobGroup: r.GroupName,
		Cause: axtype.ExecutionCause(r.Cause), ExecutionState: axtype.ExecutionState(r.ExecutionState), ScheduledFor: r.ScheduledFor.UTC(),
		FiredAt: r.FiredAt.UTC(), StartedAt: utcPtr(r.StartedAt), FinishedAt: utcPtr(r.FinishedAt),
		Error: deref(r.ExecutionError), ShardCount: int(r.ShardCount), Misfired: r.Misfired, Params: r.Params,
		TraceParent: r.Traceparent, RerunOf: r.RerunOf, Shards: r.Shards}
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
	return axtype.JobSecrets{Current: current, Previous: previous}.List()
}

// CallbackRecordAttempt stores an attempt and moves its callback on; it
// returns ErrNotFound when the delivery was superseded (redelivered).
func CallbackRecordAttempt(ctx context.Context, e Executor, r *axtype.CallbackAttemptRecord) error {
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
func CallbackGiveUp(ctx context.Context, e Executor, ref axtype.CallbackRef, reason string) error {
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
func CallbackRedeliver(ctx context.Context, e Executor, executionID uuid.UUID) (axtype.CallbackRef, error) {
	r, err := queries.CallbackRedeliver(ctx, e, executionID)
	if err != nil {
		return axtype.CallbackRef{}, fmt.Errorf("error redelivering callback of execution %s: %w", executionID, mapErr(err))
	}
	return axtype.CallbackRef{ExecutionID: r.ExecutionID, Delivery: int(r.Delivery)}, nil
}

// CallbackGet returns an execution's callback with its last maxAttempts
// attempts, or nil when it has none.
func CallbackGet(ctx context.Context, e Executor, executionID uuid.UUID, maxAttempts int) (*axtype.Callback, error) {
	r, err := queries.CallbackGet(ctx, e, executionID)
	if errors.Is(mapErr(err), axtype.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("error getting callback of execution %s: %w", executionID, mapErr(err))
	}
	c := &axtype.Callback{ExecutionID: r.ExecutionID, State: axtype.CallbackState(r.State), Delivery: int(r.Delivery),
		Attempts: int(r.Attempts), LastStatus: int(deref(r.LastStatus)), LastError: deref(r.LastError),
		NextAttemptAt: utcPtr(r.NextAttemptAt), DeliveredAt: utcPtr(r.DeliveredAt), FailedAt: utcPtr(r.FailedAt),
		CreatedAt: r.CreatedAt.UTC()}
	if c.History, err = callbackAttemptList(ctx, e, executionID, maxAttempts); err != nil {
		return nil, err
	}
	return c, nil
}
