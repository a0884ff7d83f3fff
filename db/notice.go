package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// NoticeTargetList returns a job's notice targets in their order.
func NoticeTargetList(ctx context.Context, e Executor, jobID uuid.UUID) ([]axtype.NoticeTarget, error) {
	rows, err := queries.NoticeTargetList(ctx, e, jobID)
	if err != nil {
		return nil, fmt.Errorf("error listing notice targets of job %s: %w", jobID, mapErr(err))
	}
	out := make([]axtype.NoticeTarget, len(rows))
	for i, r := range rows {
		t := axtype.NoticeTarget{Kind: axtype.NoticeKind(r.Kind), URL: r.Url, IncidentOpen: r.IncidentOpen,
			IncidentSince: utcPtr(r.IncidentSince), FailedRuns: int(r.FailedRuns)}
		for _, ev := range r.Events {
			t.Events = append(t.Events, axtype.NoticeEvent(ev))
		}
		out[i] = t
	}
	return out, nil
}

// NoticeTargetsSet makes targets the job's notice targets, in e (a
// transaction): a target kept (same kind and URL) keeps its incident, the
// others are dropped with their notices. Events empty means all.
func NoticeTargetsSet(ctx context.Context, e Executor, jobID uuid.UUID, targets []axtype.NoticeTarget) error {
	keep := make([]int64, 0, len(targets))
	for i, t := range targets {
		events := make([]string, 0, len(axtype.NoticeEvents))
		for _, ev := range t.Events {
			events = append(events, string(ev))
		}
		if len(events) == 0 {
			for _, ev := range axtype.NoticeEvents {
				events = append(events, string(ev))
			}
		}
		id, err := queries.NoticeTargetUpsert(ctx, e, dbsqlc.NoticeTargetUpsertParams{JobID: jobID, Position: int32(i),
			Kind: dbsqlc.AxNoticeKind(t.Kind), Url: t.URL, Events: events})
		if err != nil {
			return fmt.Errorf("error storing notice target %d of job %s: %w", i, jobID, mapErr(err))
		}
		keep = append(keep, id)
	}
	if err := queries.NoticeTargetDeleteExcept(ctx, e, dbsqlc.NoticeTargetDeleteExceptParams{JobID: jobID, Keep: keep}); err != nil {
		return fmt.Errorf("error dropping notice targets of job %s: %w", jobID, mapErr(err))
	}
	return nil
}

// NoticeTakeUnenqueued marks up to max notices as enqueued and returns
// their ids, for the caller to insert their delivery jobs in the same
// transaction.
func NoticeTakeUnenqueued(ctx context.Context, e Executor, max int) ([]int64, error) {
	ids, err := queries.NoticeTakeUnenqueued(ctx, e, int32(max))
	if err != nil {
		return nil, fmt.Errorf("error taking notices to enqueue: %w", mapErr(err))
	}
	return ids, nil
}

// NoticeGetForDelivery returns what one attempt of notice id needs;
// ErrNotFound when it is gone (its job or target was deleted).
func NoticeGetForDelivery(ctx context.Context, e Executor, id int64) (*axtype.NoticeDelivery, error) {
	r, err := queries.NoticeGetForDelivery(ctx, e, id)
	if err != nil {
		return nil, fmt.Errorf("error getting notice %d: %w", id, mapErr(err))
	}
	return &axtype.NoticeDelivery{ID: r.ID, JobID: r.JobID, JobName: r.JobName, JobGroup: r.GroupName,
		Event: axtype.NoticeEvent(r.Event), ExecutionID: r.ExecutionID, Detail: r.Detail, FailedRuns: int(r.FailedRuns),
		Coalesced: int(r.Coalesced), State: axtype.NoticeState(r.State), Attempts: int(r.Attempts),
		CreatedAt: r.CreatedAt.UTC(), IncidentSince: utcPtr(r.IncidentSince), Kind: axtype.NoticeKind(r.Kind), URL: r.Url,
		Secrets: secretList(r.Secret, r.PreviousSecret)}, nil
}

// NoticeRecordAttempt moves a pending notice to then after attempt
// number attempts (pending: again at next).
func NoticeRecordAttempt(ctx context.Context, e Executor, id int64, attempts int, then axtype.NoticeState,
	status int, lastError string, next *time.Time) error {
	var st *int32
	if status != 0 {
		s := int32(status)
		st = &s
	}
	err := queries.NoticeRecordAttempt(ctx, e, dbsqlc.NoticeRecordAttemptParams{ID: id, Attempts: int32(attempts),
		State: dbsqlc.AxNoticeState(then), LastStatus: st, LastError: lastError, NextAttemptAt: next})
	if err != nil {
		return fmt.Errorf("error recording attempt of notice %d: %w", id, mapErr(err))
	}
	return nil
}

// NoticeList returns a job's last max notices, newest first.
func NoticeList(ctx context.Context, e Executor, jobID uuid.UUID, max int) ([]axtype.Notice, error) {
	rows, err := queries.NoticeList(ctx, e, dbsqlc.NoticeListParams{JobID: jobID, Max: int32(max)})
	if err != nil {
		return nil, fmt.Errorf("error listing notices of job %s: %w", jobID, mapErr(err))
	}
	out := make([]axtype.Notice, len(rows))
	for i, r := range rows {
		out[i] = axtype.Notice{ID: r.ID, Event: axtype.NoticeEvent(r.Event), ExecutionID: r.ExecutionID, Detail: r.Detail,
			FailedRuns: int(r.FailedRuns), Coalesced: int(r.Coalesced), State: axtype.NoticeState(r.State),
			Attempts: int(r.Attempts), LastStatus: int(deref(r.LastStatus)), LastError: deref(r.LastError),
			NextAttemptAt: utcPtr(r.NextAttemptAt), DeliveredAt: utcPtr(r.DeliveredAt), FailedAt: utcPtr(r.FailedAt),
			CreatedAt: r.CreatedAt.UTC(), TargetKind: axtype.NoticeKind(r.Kind), TargetURL: r.Url}
	}
	return out, nil
}
