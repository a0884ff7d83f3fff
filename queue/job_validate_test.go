package queue_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// TestJobServiceRefusesAnInvalidJob: the engine, not only the API, owns
// the rules of a definition: Create and Update refuse a job that breaks
// them with an *axtype.InvalidError naming each field as the API does,
// and write nothing.
func TestJobServiceRefusesAnInvalidJob(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	bad := newJob(func(j *axtype.Job) {
		j.TriggerKind, j.CronExpr = axtype.TriggerCron, "61 * * * *"
		j.ExecutorKind, j.Executor = axtype.ExecutorHTTP, axtype.ExecutorConfig{URL: "ftp://example.com/", Method: "POST"}
		j.TargetLabels = map[string]string{"pool": "a"} // not agentless: no timeout cap
		j.ShardCount, j.ShardParams = 2, []string{"only-one"}
	})
	_, err := e.jobs.Create(ctx, bad)
	var invalid *axtype.InvalidError
	require.ErrorAs(t, err, &invalid)
	require.ElementsMatch(t, []string{"trigger.cron", "executor.url", "shards.params"}, fields(invalid))
	require.Zero(t, e.count("SELECT count(*) FROM ax.job WHERE name = $1", bad.Name), "nothing is written")

	job := e.job(nil)
	before := *job
	job.TriggerKind, job.IntervalSeconds, job.JitterSeconds = axtype.TriggerInterval, 10, 10
	_, err = e.jobs.Update(ctx, job, false)
	require.ErrorAs(t, err, &invalid)
	require.Equal(t, []string{"jitter_seconds"}, fields(invalid))
	got, err := e.jobs.Get(ctx, job.ID)
	require.NoError(t, err)
	require.Equal(t, before.TriggerKind, got.TriggerKind, "the stored job is unchanged")
}

// TestValidateJobAcceptsFilledDefaults: a definition with its defaults
// filled (what the services store) passes, and the timezone is stored as
// its canonical name.
func TestValidateJobAcceptsFilledDefaults(t *testing.T) {
	for name, kind := range map[string]axtype.ExecutorKind{"shell": axtype.ExecutorShell, "agentless http": axtype.ExecutorHTTP} {
		t.Run(name, func(t *testing.T) {
			j := &axtype.Job{Name: "n", TriggerKind: axtype.TriggerCron, CronExpr: "0 * * * *", Timezone: "Europe//./Paris",
				ExecutorKind: kind, Executor: axtype.ExecutorConfig{Command: "true"}}
			if kind == axtype.ExecutorHTTP {
				j.Executor = axtype.ExecutorConfig{URL: "https://example.com/hook"}
			}
			j.FillDefaults()
			require.NoError(t, queue.ValidateJob(j, time.Now()))
			require.Equal(t, "Europe/Paris", j.Timezone)
		})
	}
	err := queue.ValidateJob(&axtype.Job{}, time.Now())
	var invalid *axtype.InvalidError
	require.True(t, errors.As(err, &invalid))
	require.ElementsMatch(t, []string{"name", "trigger.kind", "executor.kind"}, fields(invalid))
}

func fields(e *axtype.InvalidError) []string {
	out := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		out[i] = f.Field
	}
	return out
}
