package queue

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// JobService changes jobs. Each change is one transaction that also
// computes the next fire time from the database clock and notifies the
// trigger loops.
type JobService struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
}

// NewJobService returns a JobService on pool.
func NewJobService(pool *pgxpool.Pool, logger *slog.Logger) *JobService {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &JobService{pool: pool, logger: logger}
}

// Create stores a new job (ID assigned here when unset) with its first
// next_fire_at computed from the database clock. A definition that breaks
// a rule of ValidateJob is refused with an *axtype.InvalidError.
func (s *JobService) Create(ctx context.Context, job *axtype.Job) (*axtype.Job, error) {
	if err := ValidateJob(job, time.Now()); err != nil {
		return nil, err
	}
	if job.ID == uuid.Nil {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, fmt.Errorf("error generating job id: %w", err)
		}
		job.ID = id
	}
	created, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (*axtype.Job, error) {
		now, err := db.Now(ctx, tx)
		if err != nil {
			return nil, err
		}
		if job.NextFireAt, err = schedule.NextFire(job, now); err != nil {
			return nil, err
		}
		created, err := db.JobInsert(ctx, tx, job)
		if err != nil {
			return nil, err
		}
		if created.SigningSecret, err = newSigningSecret(ctx, tx, created.ID); err != nil {
			return nil, err
		}
		return created, notifyJobChanged(ctx, tx, created.ID)
	})
	if err != nil {
		return nil, fmt.Errorf("error creating job: %w", err)
	}
	s.logger.InfoContext(ctx, "job created", "job_id", created.ID, "name", created.Name,
		"trigger", created.TriggerKind, "next_fire_at", created.NextFireAt)
	return created, nil
}

// ManagedJobError refuses an API change of a job that a declaration set
// manages: the change belongs in the declaration, or the next declaration
// would undo it.
type ManagedJobError struct {
	JobID                                  uuid.UUID
	ManagedBy, DeclaredIn, DeclaredVersion string
}

func (e *ManagedJobError) Error() string {
	msg := fmt.Sprintf("job %s is managed by %s", e.JobID, e.ManagedBy)
	if e.DeclaredIn != "" {
		msg += ", declared in " + e.DeclaredIn
	}
	if e.DeclaredVersion != "" {
		msg += " (version " + e.DeclaredVersion + ")"
	}
	return msg
}

// refuseManaged returns a ManagedJobError for a managed job unless forced.
func refuseManaged(j *axtype.Job, force bool) error {
	if j.ManagedBy == "" || force {
		return nil
	}
	return &ManagedJobError{JobID: j.ID, ManagedBy: j.ManagedBy, DeclaredIn: j.DeclaredIn, DeclaredVersion: j.DeclaredVersion}
}

// Update replaces a job's definition. next_fire_at is recomputed only
// when the schedule itself changed, so editing a description never moves
// (or loses) a pending fire. A job managed by a declaration set is
// refused with a ManagedJobError unless force is set; forced, it stays
// managed, and the set's next declaration puts its definition back. A
// definition that breaks a rule of ValidateJob is refused with an
// *axtype.InvalidError.
func (s *JobService) Update(ctx context.Context, job *axtype.Job, force bool) (*axtype.Job, error) {
	if err := ValidateJob(job, time.Now()); err != nil {
		return nil, err
	}
	updated, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (*axtype.Job, error) {
		old, err := db.JobGetByIDForUpdate(ctx, tx, job.ID)
		if err != nil {
			return nil, err
		}
		if err := refuseManaged(old, force); err != nil {
			return nil, err
		}
		if err := replaceJob(ctx, tx, old, job); err != nil {
			return nil, err
		}
		return db.JobGetByID(ctx, tx, job.ID)
	})
	if err != nil {
		return nil, fmt.Errorf("error updating job: %w", err)
	}
	s.logger.InfoContext(ctx, "job updated", "job_id", updated.ID, "next_fire_at", updated.NextFireAt)
	return updated, nil
}

// replaceJob stores job's definition over old's (the same job, locked),
// moving next_fire_at only when the schedule changed.
func replaceJob(ctx context.Context, tx pgx.Tx, old, job *axtype.Job) error {
	job.NextFireAt = old.NextFireAt
	if !schedule.SameSchedule(old, job) {
		now, err := db.Now(ctx, tx)
		if err != nil {
			return err
		}
		if job.NextFireAt, err = schedule.NextFire(job, now); err != nil {
			return err
		}
	}
	if _, err := db.JobUpdate(ctx, tx, job); err != nil {
		return err
	}
	return notifyJobChanged(ctx, tx, job.ID)
}

// Get returns one job.
func (s *JobService) Get(ctx context.Context, id uuid.UUID) (*axtype.Job, error) {
	return db.JobGetByID(ctx, s.pool, id)
}

// Group returns the group of job id, for checks of keys limited to some
// groups; an error wrapping axtype.ErrNotFound when there is no such job.
func (s *JobService) Group(ctx context.Context, id uuid.UUID) (string, error) {
	return db.JobGroupByID(ctx, s.pool, id)
}

// List returns a page of jobs.
func (s *JobService) List(ctx context.Context, p *db.JobListParams) ([]*axtype.Job, error) {
	return db.JobList(ctx, s.pool, p)
}

// Pause stops a job from firing until Resume.
func (s *JobService) Pause(ctx context.Context, id uuid.UUID) (*axtype.Job, error) {
	return s.setPaused(ctx, id, true)
}

// Resume lets a paused job fire again. Fires that fell due while it was
// paused are handled by the trigger loop under the job's misfire policy.
func (s *JobService) Resume(ctx context.Context, id uuid.UUID) (*axtype.Job, error) {
	return s.setPaused(ctx, id, false)
}

func (s *JobService) setPaused(ctx context.Context, id uuid.UUID, paused bool) (*axtype.Job, error) {
	job, err := db.WithTxV(ctx, s.pool, func(tx pgx.Tx) (*axtype.Job, error) {
		var err error
		if paused {
			err = db.TriggerPause(ctx, tx, id)
		} else {
			err = schedule.Resume(ctx, tx, id)
		}
		if err != nil {
			return nil, err
		}
		if err := notifyJobChanged(ctx, tx, id); err != nil {
			return nil, err
		}
		return db.JobGetByID(ctx, tx, id)
	})
	if err != nil {
		return nil, err
	}
	s.logger.InfoContext(ctx, "job pause changed", "job_id", id, "paused", paused)
	return job, nil
}

// Delete removes a job. A job managed by a declaration set is refused
// with a ManagedJobError unless force is set.
func (s *JobService) Delete(ctx context.Context, id uuid.UUID, force bool) error {
	err := db.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		old, err := db.JobGetByIDForUpdate(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := refuseManaged(old, force); err != nil {
			return err
		}
		if err := db.JobDelete(ctx, tx, id); err != nil {
			return err
		}
		return notifyJobChanged(ctx, tx, id)
	})
	if err != nil {
		return err
	}
	s.logger.InfoContext(ctx, "job deleted", "job_id", id)
	return nil
}

func notifyJobChanged(ctx context.Context, tx pgx.Tx, id uuid.UUID) error {
	return db.Notify(ctx, tx, notify.JobChangedChannel, id.String())
}
