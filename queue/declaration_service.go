package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// Declaration is a set of jobs declared in one place: the jobs an agent
// program declares next to its handlers, or those of a file given to
// `ax apply`. Jobs are matched to stored ones by group and name.
type Declaration struct {
	// ManagedBy names the set ("sdk:billing-agent", "file:jobs.yaml").
	ManagedBy string
	// Version orders the declarations of a set (see CompareVersions): one
	// older than the set's version is refused, so two builds declaring
	// the same jobs cannot undo each other in turn. "" is older than any
	// other version.
	Version string
	// Source says where the jobs are declared (a file, a program and its
	// host); it is shown when an API change of such a job is refused.
	Source string
	// Jobs are validated definitions with their defaults filled, each
	// (group, name) once.
	Jobs []*axtype.Job
	// Prune pauses the jobs the set managed that Jobs leaves out.
	Prune bool
	// DryRun works out and reports what would change, and changes nothing.
	DryRun bool
	// Adopt takes over declared jobs that exist already and no set
	// manages (made through the API or the console); without it they are
	// refused, so a file never silently claims a hand-made job.
	Adopt bool
	// Force applies an older version, and takes over jobs that another
	// set manages.
	Force bool
	// Groups are the groups the caller's key is limited to; nil: none. A
	// set belongs to the groups of the key that first applied it: a key
	// limited to groups may change it only when it holds all of them and
	// every group of the set's jobs (else *DeclarationForbiddenError), and
	// Prune pauses only jobs of these groups.
	Groups []string
}

// DeclarationAction is what a declaration did to one job.
type DeclarationAction string

// What a declaration does to a job.
const (
	DeclarationCreated   DeclarationAction = "created"
	DeclarationUpdated   DeclarationAction = "updated"
	DeclarationUnchanged DeclarationAction = "unchanged"
	DeclarationPaused    DeclarationAction = "paused"
	DeclarationConflict  DeclarationAction = "conflict"
)

// DeclaredJob is the outcome for one job.
type DeclaredJob struct {
	// Index is the job's place in Declaration.Jobs; -1 for a job of the
	// set that the declaration left out.
	Index  int
	Action DeclarationAction
	// Old is the job as it was (nil when created); New as it is after the
	// declaration (as it would be, on a dry run).
	Old, New *axtype.Job
	// Reason explains a pause, a resume or a conflict.
	Reason string
}

// DeclarationResult is what a declaration did, job by job: declared
// jobs in their order, then the jobs it paused.
type DeclarationResult struct {
	ManagedBy, Version string
	DryRun             bool
	Jobs               []DeclaredJob
}

// Changed reports whether the declaration changed anything.
func (r *DeclarationResult) Changed() bool {
	for _, j := range r.Jobs {
		if j.Action != DeclarationUnchanged {
			return true
		}
	}
	return false
}

// DeclarationConflictError refuses a whole declaration: its version is
// older than the set's, or some of its jobs are managed by another set.
// Nothing of it was applied.
type DeclarationConflictError struct {
	ManagedBy, Version string
	// SetVersion is the set's version when the declaration is older.
	SetVersion string
	Older      bool
	// Jobs are the jobs managed elsewhere (Action conflict, with Reason).
	Jobs []DeclaredJob
}

func (e *DeclarationConflictError) Error() string {
	if e.Older {
		return fmt.Sprintf("declaration set %s is at version %q; version %q is older and was not applied",
			e.ManagedBy, e.SetVersion, e.Version)
	}
	reasons := make([]string, len(e.Jobs))
	for i, j := range e.Jobs {
		reasons[i] = j.Reason
	}
	return fmt.Sprintf("declaration set %s was not applied: %s", e.ManagedBy, strings.Join(reasons, "; "))
}

// DeclarationForbiddenError refuses a declaration of a set that the
// caller's key may not change: the set belongs to groups the key does not
// hold, or has jobs in them. Nothing was applied or recorded. It names no
// group, so a limited key learns nothing of other groups.
type DeclarationForbiddenError struct {
	ManagedBy string
}

func (e *DeclarationForbiddenError) Error() string {
	return fmt.Sprintf("declaration set %s belongs to job groups this API key is not limited to; "+
		"a key of all the set's groups (or one limited to no groups) may change it", e.ManagedBy)
}

// DeclarationJobError is the error of one declared job (a rate class
// that does not exist…), with its index.
type DeclarationJobError struct {
	Index int
	Err   error
}

func (e *DeclarationJobError) Error() string { return fmt.Sprintf("jobs[%d]: %v", e.Index, e.Err) }
func (e *DeclarationJobError) Unwrap() error { return e.Err }

// Labels of ax_declaration_conflicts_total.
const (
	ConflictOlderVersion     = "older_version"
	ConflictManagedElsewhere = "managed_elsewhere"
)

// DeclarationService applies declarations: each in one transaction, under
// a lock of its set, writing only the jobs that change.
type DeclarationService struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	metrics *metrics.Metrics
}

// NewDeclarationService returns a DeclarationService on pool; m may be nil.
func NewDeclarationService(pool *pgxpool.Pool, logger *slog.Logger, m *metrics.Metrics) *DeclarationService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &DeclarationService{pool: pool, logger: logger, metrics: m}
}

// errDryRun rolls back a dry run's transaction.
var errDryRun = errors.New("dry run")

// Apply applies d. A declaration refused as a whole returns a
// *DeclarationConflictError, recorded on the set and counted; an error of
// one job a *DeclarationJobError. Either way nothing of d is applied.
func (s *DeclarationService) Apply(ctx context.Context, d *Declaration) (*DeclarationResult, error) {
	for i, j := range d.Jobs {
		if err := ValidateJob(j, time.Now()); err != nil {
			return nil, &DeclarationJobError{Index: i, Err: err}
		}
	}
	res := &DeclarationResult{ManagedBy: d.ManagedBy, Version: d.Version, DryRun: d.DryRun}
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		a := &applier{d: d, tx: tx, res: res}
		if err := a.run(ctx); err != nil {
			return err
		}
		if d.DryRun {
			return errDryRun
		}
		return nil
	})
	var conflict *DeclarationConflictError
	switch {
	case errors.Is(err, errDryRun):
		return res, nil
	case errors.As(err, &conflict):
		s.recordConflict(ctx, d, conflict)
		return nil, err
	case err != nil:
		return nil, err
	}
	s.log(ctx, res)
	return res, nil
}

// recordConflict keeps a refused declaration on its set (visible in GET
// /v1/declarations) and counts it; a dry run only counts nothing.
func (s *DeclarationService) recordConflict(ctx context.Context, d *Declaration, e *DeclarationConflictError) {
	if d.DryRun {
		return
	}
	reason := ConflictManagedElsewhere
	if e.Older {
		reason = ConflictOlderVersion
	}
	if s.metrics != nil {
		s.metrics.DeclarationConflicts.WithLabelValues(reason).Inc()
	}
	c := &axtype.DeclarationConflict{Version: d.Version, Source: d.Source, Reason: e.Error()}
	if err := db.DeclarationSetConflict(ctx, s.pool, d.ManagedBy, c); err != nil {
		s.logger.ErrorContext(ctx, "error recording a declaration conflict", "managed_by", d.ManagedBy, "error", err)
	}
	s.logger.WarnContext(ctx, "declaration refused", "managed_by", d.ManagedBy, "version", d.Version,
		"source", d.Source, "reason", reason, "error", e.Error())
}

func (s *DeclarationService) log(ctx context.Context, res *DeclarationResult) {
	counts := map[DeclarationAction]int{}
	for _, j := range res.Jobs {
		counts[j.Action]++
		if j.Action != DeclarationUnchanged {
			s.logger.InfoContext(ctx, "declared job "+string(j.Action), "job_id", j.New.ID, "group", j.New.Group,
				"name", j.New.Name, "managed_by", res.ManagedBy, "version", res.Version, "reason", j.Reason)
		}
	}
	s.logger.InfoContext(ctx, "declaration applied", "managed_by", res.ManagedBy, "version", res.Version,
		"created", counts[DeclarationCreated], "updated", counts[DeclarationUpdated],
		"unchanged", counts[DeclarationUnchanged], "paused", counts[DeclarationPaused])
}

// applier applies one declaration inside its transaction.
type applier struct {
	d       *Declaration
	tx      pgx.Tx
	res     *DeclarationResult
	set     *axtype.DeclarationSet
	changed bool
}

func (a *applier) run(ctx context.Context) error {
	d := a.d
	var err error
	if a.set, err = db.DeclarationSetLock(ctx, a.tx, d.ManagedBy); err != nil {
		return err
	}
	keys := make([]axtype.JobKey, len(d.Jobs))
	for i, j := range d.Jobs {
		keys[i] = axtype.JobKey{Group: j.Group, Name: j.Name}
	}
	stored, err := db.JobListForDeclaration(ctx, a.tx, keys, d.ManagedBy)
	if err != nil {
		return err
	}
	if !mayChangeSet(d.Groups, a.set, stored) {
		return &DeclarationForbiddenError{ManagedBy: d.ManagedBy}
	}
	if !d.Force && CompareVersions(d.Version, a.set.Version) < 0 {
		return &DeclarationConflictError{ManagedBy: d.ManagedBy, Version: d.Version, SetVersion: a.set.Version, Older: true}
	}
	if !a.set.Owned {
		if err := db.DeclarationSetClaim(ctx, a.tx, d.ManagedBy, d.Groups); err != nil {
			return err
		}
	}
	if err := a.canonicalParams(ctx); err != nil {
		return err
	}
	byKey := make(map[axtype.JobKey]*axtype.Job, len(stored))
	for _, j := range stored {
		byKey[axtype.JobKey{Group: j.Group, Name: j.Name}] = j
	}
	if err := a.refuseTakeovers(keys, byKey); err != nil {
		return err
	}
	for i, j := range d.Jobs {
		if err := a.declare(ctx, i, j, byKey[keys[i]]); err != nil {
			return &DeclarationJobError{Index: i, Err: err}
		}
		delete(byKey, keys[i])
	}
	if d.Prune {
		if err := a.prune(ctx, stored, byKey); err != nil {
			return err
		}
	}
	if a.changed || a.set.Version != d.Version || a.set.Source != d.Source || a.set.Jobs != len(d.Jobs) {
		return db.DeclarationSetApplied(ctx, a.tx, d.ManagedBy, d.Version, d.Source, len(d.Jobs))
	}
	return nil
}

// mayChangeSet reports whether a key limited to groups (nil: to none) may
// change set, whose stored jobs (those it manages among them) are given:
// it must hold every group that owns the set and every group of its jobs.
// An unowned set (never applied) with no jobs is anyone's.
func mayChangeSet(groups []string, set *axtype.DeclarationSet, stored []*axtype.Job) bool {
	if groups == nil {
		return true
	}
	if set.Owned && (set.OwnerGroups == nil || !subset(set.OwnerGroups, groups)) {
		return false
	}
	for _, j := range stored {
		if j.ManagedBy == set.ManagedBy && !slices.Contains(groups, j.Group) {
			return false
		}
	}
	return true
}

func subset(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// canonicalParams replaces each job's params by what jsonb makes of them,
// so that an unchanged job compares equal to its stored self.
func (a *applier) canonicalParams(ctx context.Context) error {
	docs := make([]string, len(a.d.Jobs))
	for i, j := range a.d.Jobs {
		docs[i] = "{}"
		if len(j.Params) > 0 {
			docs[i] = string(j.Params)
		}
	}
	canon, err := db.JSONCanonical(ctx, a.tx, docs)
	if err != nil {
		return err
	}
	for i, j := range a.d.Jobs {
		j.Params = []byte(canon[i])
	}
	return nil
}

// refuseTakeovers returns a conflict listing the declared jobs that
// another set manages, unless forced.
func (a *applier) refuseTakeovers(keys []axtype.JobKey, byKey map[axtype.JobKey]*axtype.Job) error {
	if a.d.Force {
		return nil
	}
	var conflicts []DeclaredJob
	for i, k := range keys {
		old := byKey[k]
		if old == nil || old.ManagedBy == a.d.ManagedBy || (old.ManagedBy == "" && a.d.Adopt) {
			continue
		}
		if old.ManagedBy == "" {
			conflicts = append(conflicts, DeclaredJob{Index: i, Action: DeclarationConflict, Old: old, New: old,
				Reason: fmt.Sprintf("job %s/%s exists and no declaration set manages it", k.Group, k.Name)})
			continue
		}
		reason := fmt.Sprintf("job %s/%s is managed by %s", k.Group, k.Name, old.ManagedBy)
		if old.DeclaredIn != "" {
			reason += " (declared in " + old.DeclaredIn + ")"
		}
		conflicts = append(conflicts, DeclaredJob{Index: i, Action: DeclarationConflict, Old: old, New: old, Reason: reason})
	}
	if len(conflicts) == 0 {
		return nil
	}
	return &DeclarationConflictError{ManagedBy: a.d.ManagedBy, Version: a.d.Version, Jobs: conflicts}
}

// declare creates, updates or leaves job i as declared.
func (a *applier) declare(ctx context.Context, i int, job, old *axtype.Job) error {
	if err := RestoreWriteOnly(job, old); err != nil {
		return err
	}
	if old == nil {
		created, err := a.create(ctx, job)
		if err != nil {
			return err
		}
		a.add(DeclaredJob{Index: i, Action: DeclarationCreated, New: created})
		return nil
	}
	job.ID = old.ID
	same, err := db.JobSameDefinition(old, job)
	if err != nil {
		return err
	}
	resume := old.Paused && old.PausedReason != ""
	if same && !resume && old.ManagedBy == a.d.ManagedBy {
		a.add(DeclaredJob{Index: i, Action: DeclarationUnchanged, Old: old, New: old})
		return nil
	}
	if !same {
		if err := replaceJob(ctx, a.tx, old, job); err != nil {
			return err
		}
	}
	if err := db.JobSetDeclared(ctx, a.tx, job.ID, a.d.ManagedBy, a.d.Version, a.d.Source); err != nil {
		return err
	}
	var reason string
	if resume {
		reason = "declared again: resumed"
		if err := schedule.Resume(ctx, a.tx, job.ID); err != nil {
			return err
		}
	}
	if old.ManagedBy != a.d.ManagedBy {
		reason = strings.TrimPrefix(reason+"; now managed by "+a.d.ManagedBy, "; ")
	}
	updated, err := db.JobGetByID(ctx, a.tx, job.ID)
	if err != nil {
		return err
	}
	a.add(DeclaredJob{Index: i, Action: DeclarationUpdated, Old: old, New: updated, Reason: reason})
	return notifyJobChanged(ctx, a.tx, job.ID)
}

// create stores a new declared job as JobService.Create does.
func (a *applier) create(ctx context.Context, job *axtype.Job) (*axtype.Job, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return nil, fmt.Errorf("error generating job id: %w", err)
	}
	job.ID = id
	now, err := db.Now(ctx, a.tx)
	if err != nil {
		return nil, err
	}
	if job.NextFireAt, err = schedule.NextFire(job, now); err != nil {
		return nil, err
	}
	if _, err := db.JobInsert(ctx, a.tx, job); err != nil {
		return nil, err
	}
	// The secret is not shown: POST /v1/jobs/{id}/secret/rotate shows a new one.
	if _, err := newSigningSecret(ctx, a.tx, id); err != nil {
		return nil, err
	}
	if err := db.JobSetDeclared(ctx, a.tx, id, a.d.ManagedBy, a.d.Version, a.d.Source); err != nil {
		return nil, err
	}
	if err := notifyJobChanged(ctx, a.tx, id); err != nil {
		return nil, err
	}
	return db.JobGetByID(ctx, a.tx, id)
}

// prune pauses the set's jobs that the declaration left out (left, in
// stored order); a job paused already stays as it is.
func (a *applier) prune(ctx context.Context, stored []*axtype.Job, left map[axtype.JobKey]*axtype.Job) error {
	reason := fmt.Sprintf("left out of declaration set %s", a.d.ManagedBy)
	if a.d.Version != "" {
		reason += " at version " + a.d.Version
	}
	if a.d.Source != "" {
		reason += " (" + a.d.Source + ")"
	}
	for _, old := range stored {
		if left[axtype.JobKey{Group: old.Group, Name: old.Name}] == nil || old.ManagedBy != a.d.ManagedBy ||
			(a.d.Groups != nil && !slices.Contains(a.d.Groups, old.Group)) {
			continue
		}
		paused, err := db.TriggerPauseWithReason(ctx, a.tx, old.ID, reason)
		if err != nil {
			return err
		}
		if !paused {
			a.add(DeclaredJob{Index: -1, Action: DeclarationUnchanged, Old: old, New: old,
				Reason: "left out of the set; paused already"})
			continue
		}
		if err := notifyJobChanged(ctx, a.tx, old.ID); err != nil {
			return err
		}
		now, err := db.JobGetByID(ctx, a.tx, old.ID)
		if err != nil {
			return err
		}
		a.add(DeclaredJob{Index: -1, Action: DeclarationPaused, Old: old, New: now, Reason: reason})
	}
	return nil
}

func (a *applier) add(j DeclaredJob) {
	a.res.Jobs = append(a.res.Jobs, j)
	a.changed = a.changed || j.Action != DeclarationUnchanged
}

// Sets returns the declaration sets a key limited to groups may change
// (see Declaration.Groups); every set when groups is nil.
func (s *DeclarationService) Sets(ctx context.Context, groups []string) ([]*axtype.DeclarationSet, error) {
	return db.DeclarationSetList(ctx, s.pool, groups)
}
