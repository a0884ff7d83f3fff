package queue_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/notify"
)

// changed subscribes to the job-changed notifications of one job.
func (e *env) changed(id uuid.UUID) <-chan struct{} {
	ch, unsubscribe := e.notifier.SubscribeKey(notify.JobChangedChannel, id.String())
	e.t.Cleanup(unsubscribe)
	return ch
}

func (e *env) dbNow() time.Time {
	e.t.Helper()
	var now time.Time
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT now()").Scan(&now))
	return now
}

func TestJobServiceCreateSchedulesAndNotifies(t *testing.T) {
	e := setup(t)
	def := newJob(func(j *axtype.Job) { j.TriggerKind = axtype.TriggerInterval; j.IntervalSeconds = 60 })
	def.ID = uuid.Must(uuid.NewV7())
	wake := e.changed(def.ID)
	before := e.dbNow()

	job, err := e.jobs.Create(context.Background(), def)
	require.NoError(t, err)
	require.True(t, woken(wake), "trigger loops hear of the new job")
	require.True(t, strings.HasPrefix(job.SigningSecret, "whsec_"), "the signing secret is shown once, at creation")
	require.NotNil(t, job.NextFireAt)
	require.WithinRange(t, *job.NextFireAt, before.Add(60*time.Second), e.dbNow().Add(60*time.Second),
		"the first fire is one interval from now, by the database clock")
	got, err := e.jobs.Get(context.Background(), job.ID)
	require.NoError(t, err)
	require.Equal(t, job.NextFireAt.UTC(), got.NextFireAt.UTC())
	require.Empty(t, got.SigningSecret, "a read never shows the secret")
}

func TestJobServiceUpdateMovesTheNextFireOnlyForANewSchedule(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.TriggerKind = axtype.TriggerInterval; j.IntervalSeconds = 60 })
	wake := e.changed(job.ID)

	job.Description = "only the words change"
	updated, err := e.jobs.Update(ctx, job, false)
	require.NoError(t, err)
	require.True(t, woken(wake))
	require.Equal(t, "only the words change", updated.Description)
	require.Equal(t, job.NextFireAt.UTC(), updated.NextFireAt.UTC(), "a pending fire is neither moved nor lost")

	before := e.dbNow()
	updated.IntervalSeconds = 3600
	rescheduled, err := e.jobs.Update(ctx, updated, false)
	require.NoError(t, err)
	require.True(t, woken(wake))
	require.WithinRange(t, *rescheduled.NextFireAt, before.Add(time.Hour), e.dbNow().Add(time.Hour))
}

func TestJobServiceResumeRecordsThePausedTicksAsSkipped(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(func(j *axtype.Job) { j.TriggerKind = axtype.TriggerInterval; j.IntervalSeconds = 10 })
	wake := e.changed(job.ID)

	paused, err := e.jobs.Pause(ctx, job.ID)
	require.NoError(t, err)
	require.True(t, paused.Paused)
	require.True(t, woken(wake), "trigger loops hear of the pause")
	// The job stays paused through a minute of ticks.
	var due time.Time
	require.NoError(t, e.pool.QueryRow(ctx, `UPDATE ax.trigger SET next_fire_at = date_trunc('second', now()) - interval '65 seconds'
		WHERE job_id = $1 RETURNING next_fire_at`, job.ID).Scan(&due))

	resumed, err := e.jobs.Resume(ctx, job.ID)
	require.NoError(t, err)
	require.True(t, woken(wake), "trigger loops hear of the resume")
	require.False(t, resumed.Paused)
	require.True(t, resumed.NextFireAt.After(e.dbNow().Add(-time.Second)), "the next fire is ahead, not a burst of catch-ups")

	skipped, err := e.execs.SkippedFires(ctx, job.ID, 10)
	require.NoError(t, err)
	require.Len(t, skipped, 1)
	s := skipped[0]
	require.Equal(t, axtype.SkipPaused, s.Reason)
	require.Equal(t, due.UTC(), s.FirstTick.UTC())
	require.GreaterOrEqual(t, s.TickCount, 7, "every tick of the paused minute")
	require.Equal(t, s.TickCount, int(s.LastTick.Sub(s.FirstTick)/(10*time.Second))+1)
	require.Equal(t, s.LastTick.Add(10*time.Second).UTC(), resumed.NextFireAt.UTC(), "the schedule keeps its grid")
	require.Zero(t, e.count(`SELECT count(*) FROM ax.all_executions WHERE job_id = $1`, job.ID), "paused ticks never fire")

	// Resuming a job that is not paused records nothing.
	_, err = e.jobs.Resume(ctx, job.ID)
	require.NoError(t, err)
	skipped, err = e.execs.SkippedFires(ctx, job.ID, 10)
	require.NoError(t, err)
	require.Len(t, skipped, 1)
}

func TestJobServiceDeleteRemovesTheJobAndNotifies(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	job := e.job(nil)
	wake := e.changed(job.ID)

	require.NoError(t, e.jobs.Delete(ctx, job.ID, false))
	require.True(t, woken(wake))
	_, err := e.jobs.Get(ctx, job.ID)
	require.ErrorIs(t, err, axtype.ErrNotFound)
	require.ErrorIs(t, e.jobs.Delete(ctx, job.ID, false), axtype.ErrNotFound)
}
