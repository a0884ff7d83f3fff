package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestColumnDefaultsAreFillDefaults: a job row that leaves every column
// with a default out reads back as axtype.Job.FillDefaults, the defaults'
// one owner, fills a job (the spec's default: tags are held to it by
// openapi's TestSpecDefaultsAreFillDefaults). A migration that changes a
// column default, or a change of FillDefaults alone, fails here.
func TestColumnDefaultsAreFillDefaults(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	want := &axtype.Job{Name: "bare", TriggerKind: axtype.TriggerManual, ExecutorKind: axtype.ExecutorShell,
		TargetLabels: map[string]string{"pool": "a"}} // on an agent: the hour's timeout, not the agentless cap
	want.FillDefaults()
	var id uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, agentless, target_labels)
		VALUES ('bare', 'manual', 'shell', false, '{"pool": "a"}') RETURNING id`).Scan(&id))
	_, err := pool.Exec(ctx, `INSERT INTO ax.trigger (job_id) VALUES ($1)`, id) // every job has one
	require.NoError(t, err)
	got, err := db.JobGetByID(ctx, pool, id)
	require.NoError(t, err)

	type defaulted struct {
		Group, Timezone                                               string
		RouteStrategy                                                 axtype.RouteStrategy
		ShardCount                                                    int
		ShardRangeFrom, ShardRangeTo                                  int64
		TimeoutSeconds                                                int
		TimeoutMode                                                   axtype.TimeoutMode
		RetryMaxAttempts, RetryBackoffSeconds, RetryBackoffMaxSeconds int
		ConcurrencyPolicy                                             axtype.ConcurrencyPolicy
		MisfirePolicy                                                 axtype.MisfirePolicy
		MisfireWindowSeconds, MisfireMaxFires                         int
		DegradeAction                                                 axtype.DegradeAction
		Owner, Description, RouteKey                                  string
		Priority, JitterSeconds                                       int
	}
	project := func(j *axtype.Job) defaulted {
		return defaulted{j.Group, j.Timezone, j.RouteStrategy, j.ShardCount, j.ShardRangeFrom, j.ShardRangeTo,
			j.TimeoutSeconds, j.TimeoutMode, j.RetryMaxAttempts, j.RetryBackoffSeconds, j.RetryBackoffMaxSeconds,
			j.ConcurrencyPolicy, j.MisfirePolicy, j.MisfireWindowSeconds, j.MisfireMaxFires, j.DegradeAction,
			j.Owner, j.Description, j.RouteKey, j.Priority, j.JitterSeconds}
	}
	require.Equal(t, project(want), project(got), "the SQL column defaults are not what FillDefaults fills")
}
