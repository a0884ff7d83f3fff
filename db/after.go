package db

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// afterSave stores the upstreams of job (trigger kind after), resolving
// their names to ids, or drops them for a job of another kind. It refuses
// (AfterUpstreamError) an unknown upstream and one that would close a
// cycle; the graph is locked until the transaction ends, so two saves
// cannot each close half of one.
func afterSave(ctx context.Context, e Executor, job *axtype.Job) error {
	if job.TriggerKind != axtype.TriggerAfter {
		if err := queries.AfterTriggerDrop(ctx, e, job.ID); err != nil {
			return fmt.Errorf("error dropping upstreams of job %s: %w", job.ID, mapErr(err))
		}
		return nil
	}
	if err := queries.AfterLockGraph(ctx, e); err != nil {
		return fmt.Errorf("error locking the job graph: %w", mapErr(err))
	}
	names := make([]string, len(job.AfterUpstream))
	for i, u := range job.AfterUpstream {
		names[i] = u.Job
	}
	found, err := queries.AfterJobsByName(ctx, e, names)
	if err != nil {
		return fmt.Errorf("error resolving upstream jobs: %w", mapErr(err))
	}
	byName := make(map[string]uuid.UUID, len(found))
	for _, f := range found {
		byName[f.FullName] = f.ID
	}
	ids := make([]uuid.UUID, len(names))
	positions := make([]int32, len(names))
	ons := make([]string, len(names))
	for i, u := range job.AfterUpstream {
		id, ok := byName[u.Job]
		switch {
		case !ok:
			return &axtype.AfterUpstreamError{Index: i, Reason: fmt.Sprintf("names no job: %q", u.Job)}
		case id == job.ID:
			return &axtype.AfterUpstreamError{Index: i, Reason: "names the job itself: a job cannot run after itself"}
		}
		ids[i], positions[i], ons[i] = id, int32(i), string(u.On)
		job.AfterUpstream[i].JobID = id
	}
	full, err := queries.AfterDownstreamsFull(ctx, e, dbsqlc.AfterDownstreamsFullParams{
		UpstreamIds: ids, JobID: job.ID, Most: axtype.MaxAfterDownstreams})
	if err != nil {
		return fmt.Errorf("error counting downstream jobs: %w", mapErr(err))
	}
	for i, id := range ids {
		if slices.Contains(full, id) {
			return &axtype.AfterUpstreamError{Index: i, Reason: fmt.Sprintf(
				"%q already has %d downstream jobs, the most a job may have", names[i], axtype.MaxAfterDownstreams)}
		}
	}
	cycle, err := queries.AfterReaches(ctx, e, dbsqlc.AfterReachesParams{UpstreamIds: ids, JobID: job.ID})
	if err != nil {
		return fmt.Errorf("error checking the job graph for cycles: %w", mapErr(err))
	}
	if cycle {
		return &axtype.AfterUpstreamError{Index: -1,
			Reason: "would close a cycle: the job is already upstream of one of these jobs"}
	}
	if err := queries.AfterTriggerSet(ctx, e, dbsqlc.AfterTriggerSetParams{JobID: job.ID, Mode: string(job.AfterMode)}); err != nil {
		return fmt.Errorf("error storing trigger of job %s: %w", job.ID, mapErr(err))
	}
	if err := queries.AfterEdgeDeleteAll(ctx, e, job.ID); err != nil {
		return fmt.Errorf("error dropping upstreams of job %s: %w", job.ID, mapErr(err))
	}
	err = queries.AfterEdgeInsertMany(ctx, e, dbsqlc.AfterEdgeInsertManyParams{
		JobID: job.ID, UpstreamIds: ids, Positions: positions, OnStates: ons})
	if err != nil {
		return fmt.Errorf("error storing upstreams of job %s: %w", job.ID, mapErr(err))
	}
	return nil
}

// afterFill sets the mode and upstreams of the jobs of trigger kind after
// among jobs (one query, none when there is no such job).
func afterFill(ctx context.Context, e Executor, jobs ...*axtype.Job) error {
	var ids []uuid.UUID
	byID := map[uuid.UUID]*axtype.Job{}
	for _, j := range jobs {
		if j.TriggerKind == axtype.TriggerAfter {
			ids = append(ids, j.ID)
			byID[j.ID] = j
			j.AfterMode, j.AfterUpstream = axtype.AfterAll, []axtype.AfterUpstream{}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	modes, err := queries.AfterModesOf(ctx, e, ids)
	if err != nil {
		return fmt.Errorf("error reading trigger modes: %w", mapErr(err))
	}
	for _, m := range modes {
		byID[m.JobID].AfterMode = axtype.AfterMode(m.Mode)
	}
	rows, err := queries.AfterEdgesOf(ctx, e, ids)
	if err != nil {
		return fmt.Errorf("error reading upstream jobs: %w", mapErr(err))
	}
	for _, r := range rows {
		j := byID[r.JobID]
		j.AfterUpstream = append(j.AfterUpstream, axtype.AfterUpstream{JobID: r.UpstreamJobID, Job: r.UpstreamName, On: axtype.AfterOn(r.OnState)})
	}
	return nil
}

// AfterDownstreams returns the jobs that run after job id.
func AfterDownstreams(ctx context.Context, e Executor, id uuid.UUID) ([]axtype.AfterLink, error) {
	rows, err := queries.AfterDownstreamsOf(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error listing downstream jobs of %s: %w", id, mapErr(err))
	}
	out := make([]axtype.AfterLink, len(rows))
	for i, r := range rows {
		out[i] = axtype.AfterLink{JobID: r.JobID, Job: r.JobName, On: axtype.AfterOn(r.OnState), Mode: axtype.AfterMode(r.Mode)}
	}
	return out, nil
}

// AfterWaitClaimReady takes up to max ready waits that no other
// transaction holds, until the transaction ends.
func AfterWaitClaimReady(ctx context.Context, e Executor, max int) ([]*axtype.AfterWait, error) {
	rows, err := queries.AfterWaitClaimReady(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error claiming ready waits: %w", mapErr(err))
	}
	out := make([]*axtype.AfterWait, 0, len(rows))
	for _, r := range rows {
		w, err := afterWaitFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

// AfterWaitGet returns the wait of job id for logical time at; nil when
// no upstream run for that time has ended.
func AfterWaitGet(ctx context.Context, e Executor, id uuid.UUID, at time.Time) (*axtype.AfterWait, error) {
	r, err := queries.AfterWaitGet(ctx, e, dbsqlc.AfterWaitGetParams{JobID: id, LogicalTime: at})
	if err != nil {
		if err = mapErr(err); err == axtype.ErrNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("error reading wait of job %s: %w", id, err)
	}
	return afterWaitFromRow(r)
}

// AfterWaitFired ends wait w: it made run exec (fired), or none (skipped,
// exec nil).
func AfterWaitFired(ctx context.Context, e Executor, w *axtype.AfterWait, state string, exec *uuid.UUID) error {
	err := queries.AfterWaitFired(ctx, e, dbsqlc.AfterWaitFiredParams{
		State: state, ExecutionID: exec, JobID: w.JobID, LogicalTime: w.LogicalTime})
	if err != nil {
		return fmt.Errorf("error recording fire of job %s for %s: %w", w.JobID, w.LogicalTime, mapErr(err))
	}
	return nil
}

// AfterWaitRequeue puts ready wait w, whose fire failed, behind the other
// ready waits.
func AfterWaitRequeue(ctx context.Context, e Executor, w *axtype.AfterWait) error {
	err := queries.AfterWaitRequeue(ctx, e, dbsqlc.AfterWaitRequeueParams{JobID: w.JobID, LogicalTime: w.LogicalTime})
	if err != nil {
		return fmt.Errorf("error requeueing the wait of job %s for %s: %w", w.JobID, w.LogicalTime, mapErr(err))
	}
	return nil
}

func afterWaitFromRow(r dbsqlc.AxAfterWait) (*axtype.AfterWait, error) {
	w := &axtype.AfterWait{JobID: r.JobID, LogicalTime: r.LogicalTime.UTC(), State: r.State,
		ExecutionID: r.ExecutionID, SkipRun: r.SkipRun, CascadeFrom: r.CascadeFrom}
	if err := json.Unmarshal(r.Arrived, &w.Arrived); err != nil {
		return nil, fmt.Errorf("error decoding wait of job %s: %w", r.JobID, err)
	}
	return w, nil
}

// AfterUpstreamRuns returns runs ids (live or in history) with their
// results, for a downstream's params.
func AfterUpstreamRuns(ctx context.Context, e Executor, ids []uuid.UUID) ([]axtype.AfterRun, error) {
	rows, err := queries.AfterUpstreamRuns(ctx, e, ids)
	if err != nil {
		return nil, fmt.Errorf("error reading upstream runs: %w", mapErr(err))
	}
	out := make([]axtype.AfterRun, len(rows))
	for i, r := range rows {
		out[i] = axtype.AfterRun{ID: r.ID, JobID: r.JobID, Group: r.GroupName, Name: r.JobName, State: r.State,
			ScheduledFor: r.ScheduledFor.UTC(), FinishedAt: r.FinishedAt, Result: r.Result}
	}
	return out, nil
}
