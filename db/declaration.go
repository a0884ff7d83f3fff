package db

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db/internal/dbsqlc"
	"github.com/ax-scheduler/ax/queue/axtype"
)

func declarationSetFromRow(r dbsqlc.AxDeclarationSet) *axtype.DeclarationSet {
	s := &axtype.DeclarationSet{ManagedBy: r.ManagedBy, Version: r.Version, Source: r.Source, Jobs: int(r.Jobs),
		AppliedAt: r.AppliedAt.UTC(), Owned: r.Owned, OwnerGroups: r.OwnerGroups}
	if r.ConflictAt != nil {
		s.Conflict = &axtype.DeclarationConflict{Version: deref(r.ConflictVersion), Source: deref(r.ConflictSource),
			Reason: deref(r.ConflictReason), At: r.ConflictAt.UTC()}
	}
	return s
}

// DeclarationSetLock returns the set managedBy, created empty if new, and
// locks it until the transaction ends.
func DeclarationSetLock(ctx context.Context, e Executor, managedBy string) (*axtype.DeclarationSet, error) {
	if err := queries.DeclarationSetEnsure(ctx, e, managedBy); err != nil {
		return nil, fmt.Errorf("error creating declaration set %q: %w", managedBy, mapErr(err))
	}
	row, err := queries.DeclarationSetLock(ctx, e, managedBy)
	if err != nil {
		return nil, fmt.Errorf("error locking declaration set %q: %w", managedBy, mapErr(err))
	}
	return declarationSetFromRow(row), nil
}

// DeclarationSetApplied records that the set was applied at version from
// source, with jobs jobs.
func DeclarationSetApplied(ctx context.Context, e Executor, managedBy, version, source string, jobs int) error {
	err := queries.DeclarationSetApplied(ctx, e, dbsqlc.DeclarationSetAppliedParams{
		ManagedBy: managedBy, Version: version, Source: source, Jobs: int32(jobs)})
	if err != nil {
		return fmt.Errorf("error recording declaration set %q: %w", managedBy, mapErr(err))
	}
	return nil
}

// DeclarationSetConflict records a refused declaration of the set.
func DeclarationSetConflict(ctx context.Context, e Executor, managedBy string, c *axtype.DeclarationConflict) error {
	err := queries.DeclarationSetConflict(ctx, e, dbsqlc.DeclarationSetConflictParams{
		ManagedBy: managedBy, Version: &c.Version, Source: &c.Source, Reason: &c.Reason})
	if err != nil {
		return fmt.Errorf("error recording a conflict of declaration set %q: %w", managedBy, mapErr(err))
	}
	return nil
}

// DeclarationSetClaim makes the set managedBy owned by groups (nil: by
// keys limited to no groups) unless it is owned already.
func DeclarationSetClaim(ctx context.Context, e Executor, managedBy string, groups []string) error {
	err := queries.DeclarationSetClaim(ctx, e, dbsqlc.DeclarationSetClaimParams{ManagedBy: managedBy, Groups: groups})
	if err != nil {
		return fmt.Errorf("error claiming declaration set %q: %w", managedBy, mapErr(err))
	}
	return nil
}

// DeclarationSetList returns the declaration sets by name: all of them
// when groups is nil, else those owned by some of groups whose jobs are
// all in groups.
func DeclarationSetList(ctx context.Context, e Executor, groups []string) ([]*axtype.DeclarationSet, error) {
	rows, err := queries.DeclarationSetList(ctx, e, groups)
	if err != nil {
		return nil, fmt.Errorf("error listing declaration sets: %w", mapErr(err))
	}
	out := make([]*axtype.DeclarationSet, len(rows))
	for i, r := range rows {
		out[i] = declarationSetFromRow(r)
	}
	return out, nil
}

// JobListForDeclaration locks and returns the jobs named by keys and
// those managed by managedBy.
func JobListForDeclaration(ctx context.Context, e Executor, keys []axtype.JobKey, managedBy string) ([]*axtype.Job, error) {
	p := dbsqlc.JobListForDeclarationParams{Groups: make([]string, len(keys)), Names: make([]string, len(keys)),
		ManagedBy: &managedBy}
	for i, k := range keys {
		p.Groups[i], p.Names[i] = k.Group, k.Name
	}
	rows, err := queries.JobListForDeclaration(ctx, e, p)
	if err != nil {
		return nil, fmt.Errorf("error reading the jobs of declaration set %q: %w", managedBy, mapErr(err))
	}
	jobs := make([]*axtype.Job, 0, len(rows))
	for _, r := range rows {
		j, err := jobFromRow(r.AxJob, r.AxTrigger, r.LastState,
			timeoutMeasure(r.TimeoutSamples, r.TimeoutP95Ms, r.TimeoutComputedAt))
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// JobSetDeclared marks job id as managed by managedBy, changed last by
// the declaration of version from in.
func JobSetDeclared(ctx context.Context, e Executor, id uuid.UUID, managedBy, version, in string) error {
	err := queries.JobSetDeclared(ctx, e, dbsqlc.JobSetDeclaredParams{ID: id, ManagedBy: &managedBy,
		DeclaredVersion: nilIfEmpty(version), DeclaredIn: nilIfEmpty(in)})
	if err != nil {
		return fmt.Errorf("error marking job %s as declared: %w", id, mapErr(err))
	}
	return nil
}

// TriggerPauseWithReason pauses job id for reason unless it is paused
// already, and reports whether it paused it.
func TriggerPauseWithReason(ctx context.Context, e Executor, id uuid.UUID, reason string) (bool, error) {
	n, err := queries.TriggerPauseWithReason(ctx, e, dbsqlc.TriggerPauseWithReasonParams{JobID: id, Reason: &reason})
	if err != nil {
		return false, fmt.Errorf("error pausing job %s: %w", id, mapErr(err))
	}
	return n == 1, nil
}

// JSONCanonical returns each JSON document as Postgres's jsonb writes it.
func JSONCanonical(ctx context.Context, e Executor, docs []string) ([]string, error) {
	if len(docs) == 0 {
		return nil, nil
	}
	out, err := queries.JSONCanonical(ctx, e, docs)
	if err != nil {
		return nil, fmt.Errorf("error reading JSON as jsonb: %w", mapErr(err))
	}
	return out, nil
}

// JobSameDefinition reports whether a and b define the same job: every
// column a declaration writes is equal (ids, fire history, pause and
// declaration marks aside). Params compare as given: pass them through
// JSONCanonical first.
func JobSameDefinition(a, b *axtype.Job) (bool, error) {
	pa, err := jobParams(a)
	if err != nil {
		return false, err
	}
	pb, err := jobParams(b)
	if err != nil {
		return false, err
	}
	pa.ID, pb.ID = uuid.Nil, uuid.Nil
	// Instants compare as Postgres keeps them: to the microsecond.
	for _, pair := range [][2]**time.Time{{&pa.RunAt, &pb.RunAt}, {&pa.ActiveFrom, &pb.ActiveFrom}, {&pa.ActiveUntil, &pb.ActiveUntil}} {
		x, y := *pair[0], *pair[1]
		*pair[0], *pair[1] = nil, nil
		if !sameInstant(x, y) {
			return false, nil
		}
	}
	return reflect.DeepEqual(pa, pb), nil
}

// sameInstant reports whether two optional instants are equal to the
// microsecond.
func sameInstant(x, y *time.Time) bool {
	if x == nil || y == nil {
		return x == y
	}
	return x.Truncate(time.Microsecond).Equal(y.Truncate(time.Microsecond))
}
