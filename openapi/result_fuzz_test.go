package openapi

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/testfactory"
)

// resultFuzzSeeds are results Go's decoder takes and jsonb may not.
var resultFuzzSeeds = []struct {
	result, errText string
}{
	{`{"ok":true}`, ""},
	{`{"x":"\ud800"}`, ""},
	{`["\udc00"]`, "x"},
	{`{"\ud83d\ude00":"\ud83d\ude00"}`, ""},
	{`{"n":1e1000000000}`, ""},
	{`{"n":0.` + "00000000000000000000000000000000000000000000000000" + `1e-16400}`, ""},
	{`"\u0000"`, ""},
	{`null`, "broke\x00here"},
	{`1`, "\xff\xfe"},
}

// FuzzResultPath reports, as an agent does, one run's three results in
// one call: the first carries the fuzzer's result and error text, the
// two others are plain. Whatever the first holds, the call never fails
// (no 500) and no result is left behind: the plain ones succeed, the
// fuzzed one is stored as sent or failed with bad_result, and the run
// ends.
//
//	go test -run '^$' -fuzz '^FuzzResultPath$' -fuzztime 20s ./openapi/
func FuzzResultPath(f *testing.F) {
	for _, s := range resultFuzzSeeds {
		f.Add([]byte(s.result), s.errText)
	}
	pool := dbtest.New(f)
	ctx := context.Background()
	agents := dispatch.NewLeaseBroker(pool, nil, dispatch.AgentConfig{}, nil, nil)
	agent := testfactory.Agent(ctx, f, pool, &testfactory.AgentOpts{Name: "a", Capacity: 10})
	var job Job
	require.NoError(f, jsonFormat.Unmarshal([]byte(`{"name":"r","trigger":{"kind":"manual"},"executor":{"kind":"shell","command":"x"},"shards":{"count":3},"retry":{"max_attempts":3}}`), &job))
	require.Empty(f, job.Resolve(nil, huma.NewPathBuffer([]byte("body"), 4)))
	dbJob, err := jobToDB(&job, uuid.Nil)
	require.NoError(f, err)
	// The job as the API maps it, stored as given.
	created := testfactory.Job(ctx, f, pool, &testfactory.JobOpts{Edit: func(j *axtype.Job) {
		dbJob.ID = j.ID
		*j = *dbJob
	}})

	f.Fuzz(func(t *testing.T, result []byte, errText string) {
		if len(result) > agentBodyLimit || !json.Valid(result) {
			return // the API refuses the body before it is read: a 4xx
		}
		exec := testfactory.Execution(ctx, t, pool, created.ID, nil)
		tasks, err := dispatch.Lease(ctx, pool, &dispatch.LeaseParams{AgentID: agent.ID,
			AgentExecutors: []string{"shell"}, Max: 10, Lease: time.Minute})
		require.NoError(t, err)
		require.Len(t, tasks, 3, "nothing is left from an earlier input")
		results := make([]axtype.TaskResult, len(tasks))
		for i, task := range tasks {
			require.Equal(t, exec.ID, task.ExecutionID)
			results[i] = axtype.TaskResult{TaskRef: axtype.TaskRef{ID: task.ID, Token: task.LeaseToken},
				State: axtype.TaskSucceeded, Result: json.RawMessage(`{"plain":true}`)}
		}
		results[0].Result, results[0].Error = result, errText
		done, err := agents.Complete(ctx, agent.ID, results)
		require.NoError(t, err, "a result never fails the call")
		require.Len(t, done, 3, "every result is recorded")
		for _, d := range done {
			if d.ID != tasks[0].ID {
				require.Equal(t, axtype.TaskSucceeded, d.State, "a plain result is stored")
				continue
			}
			if d.State != axtype.TaskSucceeded {
				require.Equal(t, axtype.TaskFailed, d.State)
				require.Equal(t, axtype.ErrorCodeBadResult, d.ErrorCode)
				require.NotEmpty(t, d.Error)
			}
		}
		var finished bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT finished_at IS NOT NULL FROM ax.all_executions WHERE id = $1`, exec.ID).Scan(&finished))
		require.True(t, finished, "the run ends")
	})
}
