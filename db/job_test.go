package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestJobAgentlessColumn: the backfill of migration 18 and every insert and
// update agree with axtype.Job.Agentless, the rule's one owner.
func TestJobAgentlessColumn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	m, err := db.NewMigrator(pool, nil)
	require.NoError(t, err)
	defer m.Close()
	_, err = m.DownTo(ctx, 17)
	require.NoError(t, err)

	shapes := []struct {
		kind     axtype.ExecutorKind
		labels   string
		strategy axtype.RouteStrategy
		want     bool
	}{
		{axtype.ExecutorHTTP, `{}`, axtype.RouteRoundRobin, true},
		{axtype.ExecutorHTTP, `{"pool":"a"}`, axtype.RouteRoundRobin, false},
		{axtype.ExecutorHTTP, `{}`, axtype.RouteBroadcast, false},
		{axtype.ExecutorShell, `{}`, axtype.RouteRoundRobin, false},
		{axtype.ExecutorHandler, `{}`, axtype.RouteLeastActive, false},
	}
	ids := make([]uuid.UUID, len(shapes))
	for i, s := range shapes {
		ids[i] = uuid.New()
		_, err := pool.Exec(ctx, `
			WITH j AS (
			    INSERT INTO ax.job (id, name, trigger_kind, executor_kind, executor, target_labels, route_strategy)
			    VALUES ($1, $5, 'manual', $2, '{}', $3, $4)
			    RETURNING id)
			INSERT INTO ax.trigger (job_id) SELECT id FROM j`,
			ids[i], string(s.kind), s.labels, string(s.strategy), ids[i].String())
		require.NoError(t, err)
	}
	_, err = m.Up(ctx)
	require.NoError(t, err)

	for i, s := range shapes {
		job, err := db.JobGetByID(ctx, pool, ids[i])
		require.NoError(t, err)
		require.Equal(t, s.want, job.Agentless(), "rule for %+v", s)
		require.Equal(t, s.want, storedAgentless(t, pool, ids[i]), "backfill for %+v", s)

		// Flip the target labels: the update stores the rule's new answer.
		if len(job.TargetLabels) == 0 {
			job.TargetLabels = map[string]string{"pool": "b"}
		} else {
			job.TargetLabels = nil
		}
		updated, err := db.JobUpdate(ctx, pool, job)
		require.NoError(t, err)
		require.Equal(t, updated.Agentless(), storedAgentless(t, pool, ids[i]), "update of %+v", s)
	}

	job := &axtype.Job{ID: uuid.New(), Name: "inserted", Group: "default", TriggerKind: axtype.TriggerManual, Timezone: "UTC",
		ExecutorKind: axtype.ExecutorHTTP, Executor: axtype.ExecutorConfig{URL: "https://example.com", Method: "POST"},
		RouteStrategy: axtype.RouteRoundRobin, ShardCount: 1, TimeoutSeconds: 60, RetryMaxAttempts: 1,
		ConcurrencyPolicy: axtype.ConcurrencyAllow, MisfirePolicy: axtype.MisfireFireOnce, MisfireMaxFires: 1}
	job.FillDefaults()
	_, err = db.JobInsert(ctx, pool, job)
	require.NoError(t, err)
	require.True(t, storedAgentless(t, pool, job.ID))
}

func storedAgentless(t *testing.T, pool *pgxpool.Pool, id uuid.UUID) bool {
	t.Helper()
	var agentless bool
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT agentless FROM ax.job WHERE id = $1`, id).Scan(&agentless))
	return agentless
}

// TestJobSQLDefaultsAreFillDefaults: the column defaults of ax.job, a
// safety net for rows written by hand (JobInsert passes every column),
// equal what axtype.Job.FillDefaults fills.
func TestJobSQLDefaultsAreFillDefaults(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	for _, kind := range []axtype.ExecutorKind{axtype.ExecutorShell, axtype.ExecutorHTTP} {
		id := uuid.New()
		_, err := pool.Exec(ctx, `
			WITH j AS (
			    INSERT INTO ax.job (id, name, trigger_kind, executor_kind, target_labels, agentless)
			    VALUES ($1, $2, 'manual', $3, '{"pool":"a"}', false)
			    RETURNING id)
			INSERT INTO ax.trigger (job_id) SELECT id FROM j`, id, id.String(), string(kind))
		require.NoError(t, err)
		stored, err := db.JobGetByID(ctx, pool, id)
		require.NoError(t, err)

		want := &axtype.Job{ExecutorKind: kind, TargetLabels: stored.TargetLabels}
		want.FillDefaults()
		want.Executor.Method = "" // the column's default executor is the empty object, whatever the kind
		require.Equal(t, jobDefaults(want), jobDefaults(stored), "kind %s", kind)
	}
}

// jobDefaults is what FillDefaults decides of j.
func jobDefaults(j *axtype.Job) axtype.Job {
	return axtype.Job{Group: j.Group, Timezone: j.Timezone, Executor: j.Executor, RouteStrategy: j.RouteStrategy,
		ShardCount: j.ShardCount, ShardRangeFrom: j.ShardRangeFrom, ShardRangeTo: j.ShardRangeTo,
		TimeoutSeconds: j.TimeoutSeconds, RetryMaxAttempts: j.RetryMaxAttempts,
		RetryBackoffSeconds: j.RetryBackoffSeconds, RetryBackoffMaxSeconds: j.RetryBackoffMaxSeconds,
		ConcurrencyPolicy: j.ConcurrencyPolicy, MisfirePolicy: j.MisfirePolicy,
		MisfireWindowSeconds: j.MisfireWindowSeconds, MisfireMaxFires: j.MisfireMaxFires, DegradeAction: j.DegradeAction}
}

// A job being edited (its rows locked for the update) and the same job
// being fired (its trigger claimed, then an execution inserted, whose
// foreign key takes KEY SHARE on the job) do not deadlock: the edit waits
// for the fire and goes on. With FOR UPDATE the edit held the job against
// the fire's key share while waiting for the fire's trigger.
func TestEditingAJobWhileItFiresDoesNotDeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	job := &axtype.Job{ID: uuid.New(), Name: "edited-while-firing", Group: "default", TriggerKind: axtype.TriggerManual,
		Timezone: "UTC", ExecutorKind: axtype.ExecutorShell, Executor: axtype.ExecutorConfig{Command: "true"},
		RouteStrategy: axtype.RouteRoundRobin, ShardCount: 1, TimeoutSeconds: 60, RetryMaxAttempts: 1,
		ConcurrencyPolicy: axtype.ConcurrencyAllow, MisfirePolicy: axtype.MisfireFireOnce, MisfireMaxFires: 1}
	job.FillDefaults()
	_, err := db.JobInsert(ctx, pool, job)
	require.NoError(t, err)

	fire, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer fire.Rollback(ctx)
	_, err = fire.Exec(ctx, `SELECT 1 FROM ax.trigger WHERE job_id = $1 FOR UPDATE`, job.ID) // the claim
	require.NoError(t, err)

	edited := make(chan error, 1)
	go func() {
		edited <- pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := db.JobGetByIDForUpdate(ctx, tx, job.ID)
			return err
		})
	}()
	// The edit has locked the job and waits for the trigger.
	require.Eventually(t, func() bool {
		var waiting int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%JobGetByIDForUpdate%'`).Scan(&waiting))
		return waiting == 1
	}, 10*time.Second, 10*time.Millisecond)

	_, err = fire.Exec(ctx, `INSERT INTO ax.execution (id, job_id, cause, scheduled_for, fired_at, shard_count, params, priority)
		VALUES ($1, $2, 'manual', now(), now(), 1, '{}', 0)`, uuid.New(), job.ID)
	require.NoError(t, err, "the fire's insert is not held up by the edit")
	require.NoError(t, fire.Commit(ctx))
	require.NoError(t, <-edited, "the edit goes on once the fire commits")
}
