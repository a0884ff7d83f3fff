package testfactory_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

func TestMain(m *testing.M) { dbtest.MainLeakChecked(m) }

func TestJobDefaultsAndOverrides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	plain := testfactory.Job(ctx, t, pool, nil)
	stored, err := db.JobGetByID(ctx, pool, plain.ID)
	require.NoError(t, err)
	require.Equal(t, axtype.TriggerManual, stored.TriggerKind)
	require.Equal(t, axtype.ExecutorShell, stored.ExecutorKind)
	require.Equal(t, "true", stored.Executor.Command)
	require.Equal(t, axtype.DefaultGroup, stored.Group)
	require.Equal(t, 1, stored.RetryMaxAttempts, "a test job fails fast")
	require.NotEmpty(t, plain.SigningSecret, "with its signing secret")

	edited := testfactory.Job(ctx, t, pool, &testfactory.JobOpts{Name: "nightly", Group: "etl",
		Edit: func(j *axtype.Job) { j.ShardCount = 3 }})
	stored, err = db.JobGetByID(ctx, pool, edited.ID)
	require.NoError(t, err)
	require.Equal(t, "nightly", stored.Name)
	require.Equal(t, "etl", stored.Group)
	require.Equal(t, 3, stored.ShardCount)
}

func TestExecutionMakesItsTasks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	job := testfactory.Job(ctx, t, pool, &testfactory.JobOpts{Edit: func(j *axtype.Job) { j.ShardCount = 2 }})

	priority := 7
	run := testfactory.Execution(ctx, t, pool, job.ID, &testfactory.ExecutionOpts{
		Params: json.RawMessage(`{"day":"monday"}`), Priority: &priority})
	require.Equal(t, job.ID, run.JobID)
	require.Equal(t, axtype.CauseManual, run.Cause)
	tasks := testfactory.Tasks(ctx, t, pool, run.ID)
	require.Len(t, tasks, 2, "one task a shard")
	for _, task := range tasks {
		require.Equal(t, axtype.TaskPending, task.State)
	}

	var handed int
	one := testfactory.Job(ctx, t, pool, nil)
	task := testfactory.Task(ctx, t, pool, one.ID, &testfactory.ExecutionOpts{
		Fired: func(_ context.Context, _ db.Executor, tasks []*axtype.NewTask) error {
			handed += len(tasks)
			return nil
		}})
	require.Equal(t, axtype.TaskPending, task.State)
	require.Equal(t, 1, handed, "Fired is handed the new tasks")
}

func TestAgentReadyUnlessAskedNot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)

	ready := testfactory.Agent(ctx, t, pool, &testfactory.AgentOpts{Labels: map[string]string{"gpu": "yes"}})
	require.True(t, ready.Ready)
	require.Equal(t, 100, ready.Capacity)
	require.Equal(t, []string{"shell"}, ready.Executors)
	require.Equal(t, "yes", ready.Labels["gpu"])

	key := testfactory.APIKey(ctx, t, pool, nil)
	waiting := testfactory.Agent(ctx, t, pool, &testfactory.AgentOpts{NotReady: true, APIKeyID: key.ID})
	require.False(t, waiting.Ready, "not ready before a heartbeat")
	require.Equal(t, key.ID, waiting.APIKeyID)
}
