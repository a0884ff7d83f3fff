package queue_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// TestValidateJobChecksEachOfSeveralTriggers: a list of triggers is the
// engine's to check, whoever sends it: each entry, duplicates and the
// jitter against every interval; a good list fills the job's trigger
// fields with its first.
func TestValidateJobChecksEachOfSeveralTriggers(t *testing.T) {
	job := func(ts ...axtype.TriggerSpec) *axtype.Job {
		j := &axtype.Job{Name: "n", Triggers: ts, ExecutorKind: axtype.ExecutorShell, Executor: axtype.ExecutorConfig{Command: "true"}}
		j.FillDefaults()
		return j
	}
	cronAt := func(expr, zone string) axtype.TriggerSpec {
		return axtype.TriggerSpec{Kind: axtype.TriggerCron, CronExpr: expr, Timezone: zone}
	}
	every := func(s int64) axtype.TriggerSpec {
		return axtype.TriggerSpec{Kind: axtype.TriggerInterval, IntervalSeconds: s}
	}
	for name, c := range map[string]struct {
		job  *axtype.Job
		want []string
	}{
		"bad cron":         {job(cronAt("0 9 * * 1-5", "UTC"), cronAt("0 99 * * *", "UTC")), []string{"triggers[1].cron"}},
		"bad zone":         {job(cronAt("0 9 * * *", "Mars/Olympus"), every(60)), []string{"triggers[0].timezone"}},
		"delay":            {job(every(60), axtype.TriggerSpec{Kind: axtype.TriggerDelay}), []string{"triggers[1].kind"}},
		"twice":            {job(cronAt("0 12 * * *", "Europe/Paris"), cronAt("0 12 * * *", "Europe//./Paris")), []string{"triggers[1]"}},
		"same":             {job(every(60), every(60)), []string{"triggers[1]"}},
		"only one":         {job(every(60)), []string{"triggers"}},
		"cron on interval": {job(every(60), axtype.TriggerSpec{Kind: axtype.TriggerInterval, IntervalSeconds: 5, CronExpr: "* * * * *"}), []string{"triggers[1].cron"}},
		"jitter":           {func() *axtype.Job { j := job(cronAt("0 9 * * *", "UTC"), every(30)); j.JitterSeconds = 30; return j }(), []string{"jitter_seconds"}},
		"other first": {func() *axtype.Job {
			j := job(every(60), every(90))
			j.TriggerKind, j.IntervalSeconds = axtype.TriggerInterval, 90
			return j
		}(), []string{"trigger"}},
	} {
		t.Run(name, func(t *testing.T) {
			var invalid *axtype.InvalidError
			require.ErrorAs(t, queue.ValidateJob(c.job, time.Now()), &invalid)
			require.ElementsMatch(t, c.want, fields(invalid))
		})
	}

	j := job(cronAt("0 9 * * 1-5", "Europe//./Paris"), cronAt("0 12 * * 0,6", "Europe/Paris"))
	require.NoError(t, queue.ValidateJob(j, time.Now()))
	require.Equal(t, "Europe/Paris", j.Triggers[0].Timezone)
	require.Equal(t, []any{axtype.TriggerCron, "0 9 * * 1-5", "Europe/Paris"}, []any{j.TriggerKind, j.CronExpr, j.Timezone},
		"the job's trigger fields hold the first")
}

// TestValidateJobBoundsTargetLabels: a job may target at most 100 labels,
// each value at most 255 bytes, as an agent may carry; at the bounds it
// passes. (The agents-by-pool metric takes its label values from the
// jobs' pools: one job put 500 KB into every scrape.)
func TestValidateJobBoundsTargetLabels(t *testing.T) {
	t.Parallel()
	labels := func(n, valueBytes int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = strings.Repeat("v", valueBytes)
		}
		return m
	}
	check := func(l map[string]string) []string {
		j := newJob(func(j *axtype.Job) { j.TargetLabels = l })
		var invalid *axtype.InvalidError
		if err := queue.ValidateJob(j, time.Now()); err != nil {
			require.ErrorAs(t, err, &invalid)
			return fields(invalid)
		}
		return nil
	}
	require.Empty(t, check(labels(100, 255)))
	require.Equal(t, []string{"target.labels"}, check(labels(101, 1)))
	require.Equal(t, []string{"target.labels.pool"}, check(map[string]string{"pool": strings.Repeat("p", 256)}))
}

// TestValidateJobBoundsFireAllCatchUp: a fire_all catch-up of max_fires
// runs of every shard is written in one batch, of at most
// axtype.MaxTasksPerBatch tasks: 100 runs of 1,000 shards are refused,
// 50 are taken.
func TestValidateJobBoundsFireAllCatchUp(t *testing.T) {
	t.Parallel()
	check := func(maxFires int) []string {
		j := newJob(func(j *axtype.Job) {
			j.ShardCount, j.MisfirePolicy, j.MisfireMaxFires = 1000, axtype.MisfireFireAll, maxFires
		})
		var invalid *axtype.InvalidError
		if err := queue.ValidateJob(j, time.Now()); err != nil {
			require.ErrorAs(t, err, &invalid)
			return fields(invalid)
		}
		return nil
	}
	require.Equal(t, []string{"misfire.max_fires"}, check(100))
	require.Empty(t, check(50))
}
