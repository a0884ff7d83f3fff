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
