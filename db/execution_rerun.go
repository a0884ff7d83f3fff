package db

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// NewRerun is a re-run to make of run RerunOf.
type NewRerun struct {
	ID      uuid.UUID
	RerunOf uuid.UUID
	// RequestKey makes the re-run once per (RerunOf, RequestKey): a retry
	// with the same key finds the run the first request made.
	RequestKey string
	Shards     axtype.RerunShards
	// Params overlay the original run's params (nil: none).
	Params json.RawMessage
	// Priority overrides the original's (nil: keep it).
	Priority *int
	// TraceParent is the caller's W3C trace context ("": a new trace whose
	// trace id is the execution id).
	TraceParent string
	// Cascade makes the re-run, once it ends, fire its job's downstream
	// jobs again for its logical time (after triggers).
	Cascade bool
	// CascadeRoot is the re-run whose cascade made this one (uuid.Nil: it
	// starts a cascade of its own, when Cascade).
	CascadeRoot uuid.UUID
}

// ExecutionRerunClaim links r.ID to the run it re-runs under r's key. It
// returns uuid.Nil when it did, or the re-run an earlier request with
// that key made (having waited for that request to commit).
func ExecutionRerunClaim(ctx context.Context, e Executor, r *NewRerun) (uuid.UUID, error) {
	var root *uuid.UUID
	if r.CascadeRoot != uuid.Nil {
		root = &r.CascadeRoot
	}
	_, err := queries.ExecutionRerunClaim(ctx, e, dbsqlc.ExecutionRerunClaimParams{
		ExecutionID: r.ID, RerunOf: r.RerunOf, RequestKey: r.RequestKey, Shards: string(r.Shards), Cascade: r.Cascade,
		CascadeRoot: root})
	if err == nil {
		return uuid.Nil, nil
	}
	if err = mapErr(err); !errors.Is(err, axtype.ErrNotFound) {
		return uuid.Nil, fmt.Errorf("error linking re-run of %s: %w", r.RerunOf, err)
	}
	prior, err := queries.ExecutionRerunByKey(ctx, e, dbsqlc.ExecutionRerunByKeyParams{RerunOf: r.RerunOf, RequestKey: r.RequestKey})
	if err != nil {
		return uuid.Nil, fmt.Errorf("error reading re-run of %s: %w", r.RerunOf, mapErr(err))
	}
	return prior, nil
}

// ExecutionRerunCascade returns the root of the cascade re-run id belongs
// to (id itself when it starts one, or is not a re-run) and how many
// re-runs that cascade made, its root's included, counting up to most.
func ExecutionRerunCascade(ctx context.Context, e Executor, id uuid.UUID, most int) (root uuid.UUID, made int, err error) {
	root, err = queries.ExecutionRerunCascadeRoot(ctx, e, id)
	if err = mapErr(err); errors.Is(err, axtype.ErrNotFound) {
		root, err = id, nil
	}
	if err != nil {
		return uuid.Nil, 0, fmt.Errorf("error reading the cascade of re-run %s: %w", id, err)
	}
	n, err := queries.ExecutionRerunCascadeCount(ctx, e, dbsqlc.ExecutionRerunCascadeCountParams{Root: &root, Most: int32(most)})
	if err != nil {
		return uuid.Nil, 0, fmt.Errorf("error counting the cascade of re-run %s: %w", root, mapErr(err))
	}
	return root, int(n), nil
}

// ExecutionRerunInsert makes the execution of re-run r and its tasks (the
// original's shards r.Shards chose, same indexes and params), routed by
// route. axtype.ErrNothingToRerun when no shard is chosen; the caller rolls back.
func ExecutionRerunInsert(ctx context.Context, e Executor, r *NewRerun, route axtype.RouteFunc) ([]*axtype.NewTask, error) {
	params := r.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	var priority *int32
	if r.Priority != nil {
		p := int32(*r.Priority)
		priority = &p
	}
	_, err := queries.ExecutionRerunInsert(ctx, e, dbsqlc.ExecutionRerunInsertParams{
		ID: r.ID, Params: params, Priority: priority, Traceparent: traceParentFor(r.ID, r.TraceParent), RerunOf: r.RerunOf})
	if err != nil {
		return nil, fmt.Errorf("error inserting re-run of %s: %w", r.RerunOf, mapErr(err))
	}
	rows, err := queries.TaskPlanForRerun(ctx, e, dbsqlc.TaskPlanForRerunParams{
		ExecutionID: r.ID, RerunOf: r.RerunOf, FailedOnly: r.Shards == axtype.RerunFailed})
	if err != nil {
		return nil, fmt.Errorf("error planning tasks of re-run %s: %w", r.ID, mapErr(err))
	}
	if len(rows) == 0 {
		return nil, axtype.ErrNothingToRerun
	}
	planned := make([]dbsqlc.TaskPlanForExecutionsRow, len(rows))
	for i, x := range rows {
		planned[i] = dbsqlc.TaskPlanForExecutionsRow{ExecutionID: x.ExecutionID, JobID: x.JobID,
			ShardIndex: x.ShardIndex, ShardTotal: x.ShardTotal, ShardParam: x.ShardParam, Priority: x.Priority,
			MaxAttempts: x.MaxAttempts, TimeoutSeconds: x.TimeoutSeconds, NotBefore: x.NotBefore,
			RateClass: x.RateClass, Agentless: x.Agentless, RouteStrategy: x.RouteStrategy, RouteKey: x.RouteKey,
			TargetLabels: x.TargetLabels, Params: x.Params, JobName: x.JobName, GroupName: x.GroupName,
			ExecutorKind: x.ExecutorKind, ConcurrencyTemplate: x.ConcurrencyTemplate,
			ConcurrencyLimit: x.ConcurrencyLimit, ConcurrencyGroup: x.ConcurrencyGroup, PoolID: x.PoolID}
		if x.Pinned {
			planned[i].PinnedAgentID = x.PreferredAgentID
		}
	}
	return taskRouteAndInsert(ctx, e, planned, route)
}

// traceParentFor is the caller's trace context, else a new one whose trace
// id is the execution id and whose span id is random (every fire's and
// re-run's).
func traceParentFor(id uuid.UUID, given string) string {
	if given != "" {
		return given
	}
	var span [8]byte
	_, _ = rand.Read(span[:])
	return "00-" + strings.ReplaceAll(id.String(), "-", "") + "-" + hex.EncodeToString(span[:]) + "-01"
}

// ExecutionLineage returns, in one statement, what run id re-runs, its
// re-runs (oldest first, at most 100), the backfill that made it and what
// it waited behind.
func ExecutionLineage(ctx context.Context, e Executor, id uuid.UUID) (*axtype.RunLineage, error) {
	r, err := queries.ExecutionLineage(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error reading the lineage of run %s: %w", id, mapErr(err))
	}
	out := &axtype.RunLineage{RerunOf: r.RerunOf, Reruns: r.Reruns, Backfill: r.BackfillID}
	if r.QueuedJobID != nil && r.QueuedAt != nil {
		out.Wait = &axtype.QueuedRun{ExecutionID: id, JobID: *r.QueuedJobID, QueuedAt: r.QueuedAt.UTC(),
			ReleasedAt: utcPtr(r.QueuedReleasedAt)}
		if r.QueuedBehindID != nil {
			out.Wait.BehindID = *r.QueuedBehindID
		}
	}
	return out, nil
}

// RerunCandidateParams filters the runs of a bulk re-run; nil and empty
// filters match all.
type RerunCandidateParams struct {
	JobID      *uuid.UUID
	Group      *string
	States     []axtype.ExecutionState
	From, To   *time.Time // scheduled_for in [From, To)
	ErrorCodes []string   // a shard ended with one of these
	Groups     []string   // a key limited to groups sees only these
	Limit      int
	// RequestKey leaves out the re-runs made under this key (a bulk call
	// again with its key: see ExecutionRerunCandidates in SQL).
	RequestKey string
}

// ExecutionRerunCandidates returns the ended runs p selects, oldest first.
func ExecutionRerunCandidates(ctx context.Context, e Executor, p *RerunCandidateParams) ([]axtype.RerunCandidate, error) {
	states := make([]string, len(p.States))
	for i, s := range p.States {
		states[i] = string(s)
	}
	var codes []string
	if len(p.ErrorCodes) > 0 {
		codes = p.ErrorCodes
	}
	rows, err := queries.ExecutionRerunCandidates(ctx, e, dbsqlc.ExecutionRerunCandidatesParams{
		JobID: p.JobID, GroupName: p.Group, States: states, From: p.From, To: p.To, ErrorCodes: codes,
		Groups: p.Groups, Max: int32(p.Limit), RequestKey: p.RequestKey})
	if err != nil {
		return nil, fmt.Errorf("error selecting runs to re-run: %w", mapErr(err))
	}
	out := make([]axtype.RerunCandidate, len(rows))
	for i, r := range rows {
		out[i] = axtype.RerunCandidate{ID: r.ID, JobID: r.JobID, State: axtype.ExecutionState(r.State), ScheduledFor: r.ScheduledFor.UTC()}
	}
	return out, nil
}
