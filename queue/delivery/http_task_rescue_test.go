package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// A replica killed after River fetched an HTTP request's job and before
// it leased the task leaves the job running and the task pending, with
// no lease for the reaper to end. Another replica sends it within
// seconds, not after River's rescuer (more than a minute); a job whose
// task was leased (its request may be under way) is left to the reaper.
func TestHTTPRequestFetchedByADeadReplicaIsSentByAnother(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.RescueInterval = 100 * time.Millisecond })
	target := newReceiver(t, nil)
	job := env.httpJob(target.URL+"/run", nil)

	// Both runs' jobs are taken by a replica that dies at once: one
	// before its lease, one after.
	fetchedByTheDead := func(lease bool) func(ctx context.Context, e db.Executor, tasks []*axtype.NewTask) error {
		return func(ctx context.Context, e db.Executor, tasks []*axtype.NewTask) error {
			if err := env.river.Outbox().Fired(ctx, e, tasks); err != nil {
				return err
			}
			if _, err := e.Exec(ctx, `
				UPDATE ax.river_job SET state = 'running', attempt = 1, attempted_at = now() - interval '30 seconds',
				       attempted_by = ARRAY['a_replica_that_died']
				WHERE kind = 'ax_http_task' AND args->>'execution_id' = $1::text`, tasks[0].ExecutionID); err != nil {
				return err
			}
			if !lease {
				return nil
			}
			_, err := db.TaskLeaseAgentless(ctx, e, tasks[0].ID, 1, time.Minute)
			return err
		}
	}
	leased := testfactory.Execution(context.Background(), t, env.pool, job.ID,
		&testfactory.ExecutionOpts{Fired: fetchedByTheDead(true)})
	unsent := testfactory.Execution(context.Background(), t, env.pool, job.ID,
		&testfactory.ExecutionOpts{Fired: fetchedByTheDead(false)})

	env.eventually("succeeded", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", unsent.ID)
	require.Len(t, target.requests(), 1, "the unsent request, once")
	require.Equal(t, "rescued by ax: its replica stopped before it leased its task", env.scalar(`
		SELECT errors[array_length(errors, 1)]->>'error' FROM ax.river_job
		WHERE kind = 'ax_http_task' AND args->>'execution_id' = $1::text`, unsent.ID))

	// The pass that took the unsent job saw the leased one too.
	require.Equal(t, "running", env.scalar(`SELECT state::text FROM ax.all_executions WHERE id = $1`, leased.ID))
	require.Equal(t, []any{"running", true}, []any{
		env.scalar(`SELECT state::text FROM ax.river_job WHERE kind = 'ax_http_task' AND args->>'execution_id' = $1::text`, leased.ID),
		env.scalar(`SELECT errors IS NULL OR cardinality(errors) = 0 FROM ax.river_job
			WHERE kind = 'ax_http_task' AND args->>'execution_id' = $1::text`, leased.ID),
	}, "a leased request's job is the reaper's, not the rescue's")
}

// A running River job of an HTTP request whose arguments are not ax's
// (written by hand) fails no rescue pass: it is left to River's rescuer,
// and the callback deliveries of a replica that stopped are still handed
// on beside it.
func TestRescuePassOutlivesAJobWithForeignArguments(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.RescueInterval = 100 * time.Millisecond })
	ctx := context.Background()
	env.trigger(env.job(nil).ID) // a pending task: the pass has tasks to look among
	var foreign, callback int64
	require.NoError(t, env.pool.QueryRow(ctx, `
		INSERT INTO ax.river_job (kind, queue, args, state, attempt, attempted_at, attempted_by, max_attempts)
		VALUES ('ax_http_task', 'ax_http', '{"task_id": "not-a-uuid", "attempt": "first"}', 'running', 1,
		        now() - interval '30 seconds', ARRAY['a_replica_that_died'], 1)
		RETURNING id`).Scan(&foreign))
	require.NoError(t, env.pool.QueryRow(ctx, `
		INSERT INTO ax.river_job (kind, queue, args, state, attempt, attempted_at, attempted_by, max_attempts)
		VALUES ('ax_callback', 'ax_callback', jsonb_build_object('execution_id', gen_random_uuid(), 'delivery', 1),
		        'running', 1, now() - interval '40 seconds', ARRAY['a_replica_that_died'], 1)
		RETURNING id`).Scan(&callback))

	env.eventually("rescued by ax: its replica stopped working on it", 10*time.Second,
		`SELECT coalesce(errors[1]->>'error', '') FROM ax.river_job WHERE id = $1`, callback)
	require.Equal(t, []any{"running", true}, []any{
		env.scalar(`SELECT state::text FROM ax.river_job WHERE id = $1`, foreign),
		env.scalar(`SELECT errors IS NULL OR cardinality(errors) = 0 FROM ax.river_job WHERE id = $1`, foreign),
	}, "a job whose arguments are not ax's is River's rescuer's")
	// The pass's statement reads past it without an error.
	_, err := db.RiverJobRescueUnsent(ctx, env.pool, delivery.HTTPTaskArgs{}.Kind(), 10*time.Second)
	require.NoError(t, err, "the rescue of unsent requests beside a job not of ax")
}
