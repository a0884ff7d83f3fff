package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/httptask"
)

// envelope decodes an agentless HTTP task's request body.
func envelope(t *testing.T, r received) httptask.Envelope {
	t.Helper()
	var env httptask.Envelope
	require.NoError(t, json.Unmarshal(r.body, &env), string(r.body))
	return env
}

// A 2xx answer succeeds the task with the body as its result; the request
// carries the execution id as Idempotency-Key and webhook-id, signed with
// the job's secret.
func TestHTTPTaskSucceedsOn2xx(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	target := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"rows":42,"id":12345678901234567890}`))
		return false
	})
	job := env.httpJob(target.URL+"/run", func(j *axtype.Job) { j.Params = json.RawMessage(`{"region":"eu"}`) })
	exec := env.trigger(job.ID)

	env.eventually("succeeded", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	var result string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT result::text FROM ax.all_tasks WHERE execution_id = $1", exec.ID).Scan(&result))
	require.JSONEq(t, `{"rows":42,"id":12345678901234567890}`, result)

	got := target.requests()
	require.Len(t, got, 1)
	require.Equal(t, exec.ID.String(), got[0].header.Get("Idempotency-Key"))
	require.NotEmpty(t, exec.TraceParent)
	require.Equal(t, exec.TraceParent, got[0].header.Get("traceparent"), "the target joins the run's trace")
	require.Equal(t, exec.ID.String(), verify(t, got[0], job.SigningSecret).ID)
	body := envelope(t, got[0])
	require.Equal(t, exec.ID.String(), body.ExecutionID)
	require.Equal(t, httptask.Shard{Index: 0, Total: 1, Param: "0-4294967296"}, body.Shard)
	require.JSONEq(t, `{"region":"eu"}`, string(body.Params))
	require.Equal(t, 1, body.Attempt)
}

// A 500 is retried per the job's retry policy (same key every attempt),
// then the task and the execution fail with the answer as error.
func TestHTTPTaskRetriesThenFails(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	target := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		http.Error(w, "database is down", http.StatusInternalServerError)
		return false
	})
	job := env.httpJob(target.URL, func(j *axtype.Job) { j.RetryMaxAttempts = 3 })
	exec := env.trigger(job.ID)

	env.eventually("failed", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	got := target.requests()
	require.Len(t, got, 3)
	for i, r := range got {
		require.Equal(t, exec.ID.String(), r.header.Get("Idempotency-Key"))
		require.Equal(t, i+1, envelope(t, r).Attempt)
	}
	var attempt int
	var msg string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT attempt, error FROM ax.all_tasks WHERE execution_id = $1", exec.ID).Scan(&attempt, &msg))
	require.Equal(t, 3, attempt)
	require.Contains(t, msg, "HTTP 500 Internal Server Error: database is down")
}

// A 202 leaves the task running; the result posted later with the
// completion token from the request ends it.
func TestHTTPTaskAcceptedThenCompleted(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.HTTP.PublicURL = "http://ax.example" })
	target := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool {
		w.WriteHeader(http.StatusAccepted)
		return false
	})
	job := env.httpJob(target.URL, nil)
	exec := env.trigger(job.ID)
	env.eventually(int32(1), 10*time.Second, "SELECT count(*)::int FROM ax.all_tasks WHERE execution_id = $1 AND state = 'running'", exec.ID)
	require.Eventually(t, func() bool { return len(target.requests()) == 1 }, 5*time.Second, 10*time.Millisecond)
	req := envelope(t, target.requests()[0])
	require.NotNil(t, req.Completion)
	require.Equal(t, "http://ax.example/v1/tasks/"+req.TaskID+"/complete", req.Completion.URL)
	require.Equal(t, req.Completion.Token, target.requests()[0].header.Get("Ax-Completion-Token"))
	// The worker took the 202 and parked until the deadline: the task
	// waits for its posted result.
	env.eventually("scheduled", 10*time.Second, "SELECT state::text FROM ax.river_job WHERE kind = 'ax_http_task'")
	require.Equal(t, "running", env.scalar("SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID))

	completer := delivery.NewTaskCompleter(env.pool, env.river.Outbox(), nil, nil)
	state, err := completer.Complete(context.Background(), taskResult(t, req, "succeeded", `{"report":"done"}`))
	require.NoError(t, err)
	require.Equal(t, axtype.TaskSucceeded, state)
	require.Equal(t, "succeeded", env.scalar("SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID))
	_, err = completer.Complete(context.Background(), taskResult(t, req, "succeeded", `{}`))
	require.ErrorIs(t, err, delivery.ErrStaleCompletion, "a token works once")
	_, err = completer.Complete(context.Background(), axtype.TaskResult{TaskRef: axtype.TaskRef{ID: uuid.New(), Token: uuid.New()}, State: "succeeded"})
	require.ErrorIs(t, err, delivery.ErrUnknownHTTPTask)
}

func taskResult(t *testing.T, req httptask.Envelope, state axtype.TaskState, result string) axtype.TaskResult {
	t.Helper()
	return axtype.TaskResult{TaskRef: axtype.TaskRef{ID: uuid.MustParse(req.TaskID), Token: uuid.MustParse(req.Completion.Token)},
		State: state, Result: json.RawMessage(result)}
}

// A target that answers 202 and posts its result after the deadline is
// refused: the reaper timed the attempt out, and the retry (a new request
// with a new token) decides the task.
func TestHTTPTaskCompletionAfterDeadlineRefused(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.HTTP.PublicURL = "http://ax.example" })
	reaper := dispatch.NewReaper(env.pool, dispatch.AgentConfig{}, dispatch.ReaperConfig{Interval: 50 * time.Millisecond,
		Outbox: env.river.Outbox()})
	require.NoError(t, reaper.Start(context.Background()))
	t.Cleanup(reaper.Stop)
	target := newReceiver(t, func(n int, w http.ResponseWriter, _ *http.Request) bool {
		if n == 1 {
			w.WriteHeader(http.StatusAccepted)
			return false
		}
		_, _ = w.Write([]byte(`{"second":true}`))
		return false
	})
	job := env.httpJob(target.URL, func(j *axtype.Job) { j.TimeoutSeconds, j.RetryMaxAttempts = 1, 2 })
	exec := env.trigger(job.ID)

	env.eventually("succeeded", 15*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	got := target.requests()
	require.Len(t, got, 2)
	first, second := envelope(t, got[0]), envelope(t, got[1])
	require.Equal(t, 2, second.Attempt)
	require.NotEqual(t, first.Completion.Token, second.Completion.Token, "each attempt has its own token")
	require.Equal(t, got[0].header.Get("Idempotency-Key"), got[1].header.Get("Idempotency-Key"))

	_, err := delivery.NewTaskCompleter(env.pool, env.river.Outbox(), nil, nil).
		Complete(context.Background(), taskResult(t, first, "succeeded", `{"late":true}`))
	require.ErrorIs(t, err, delivery.ErrStaleCompletion)
	var result string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT result::text FROM ax.all_tasks WHERE execution_id = $1", exec.ID).Scan(&result))
	require.JSONEq(t, `{"second":true}`, result)
	require.EqualValues(t, 1, env.scalar(`SELECT count(*) FROM ax.task_event WHERE execution_id = $1
		AND attempt = 1 AND state = 'timed_out' AND message LIKE 'timed out after%'`, exec.ID), "the reaper timed the first attempt out")
}

// Each shard of an agentless job is its own request with its own shard
// param and key.
func TestHTTPTaskShardsSendOwnRequests(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	target := newReceiver(t, nil)
	job := env.httpJob(target.URL, func(j *axtype.Job) { j.ShardCount, j.ShardParams = 4, []string{"a", "b", "c", "d"} })
	exec := env.trigger(job.ID)

	env.eventually("succeeded", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	got := target.requests()
	require.Len(t, got, 4)
	var params, keys []string
	for _, r := range got {
		body := envelope(t, r)
		require.Equal(t, 4, body.Shard.Total)
		params = append(params, body.Shard.Param)
		keys = append(keys, r.header.Get("Idempotency-Key"))
		require.Equal(t, r.header.Get("Idempotency-Key"), verify(t, r, job.SigningSecret).ID)
	}
	sort.Strings(params)
	sort.Strings(keys)
	require.Equal(t, []string{"a", "b", "c", "d"}, params)
	id := exec.ID.String()
	require.Equal(t, []string{id + ":0", id + ":1", id + ":2", id + ":3"}, keys)
}

// Agents never lease what ax serve sends itself.
func TestAgentsDoNotLeaseAgentlessTasks(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	env.river.Stop() // nothing sends: the task stays pending
	job := env.httpJob("http://127.0.0.1:9/run", nil)
	env.trigger(job.ID)
	require.EqualValues(t, 1, env.scalar("SELECT count(*) FROM ax.all_tasks WHERE agentless AND state = 'pending'"))

	ctx := context.Background()
	key, err := db.APIKeyInsert(ctx, env.pool, &db.APIKeyInsertParams{ID: newID(t), Name: "agent",
		Hash: []byte("h"), Prefix: "ax_", Scopes: []string{"agent"}})
	require.NoError(t, err)
	agent, err := db.AgentInsert(ctx, env.pool, &axtype.Agent{ID: newID(t), Name: "a1", Capacity: 4, Weight: 1, APIKeyID: key.ID,
		Executors: []string{"shell", "http", "handler"}})
	require.NoError(t, err)
	tasks, err := dispatch.Lease(ctx, env.pool, &dispatch.LeaseParams{AgentID: agent.ID, Max: 10, Lease: time.Minute,
		StealAfter: time.Second, StarveAfter: 0, AgentExecutors: agent.Executors})
	require.NoError(t, err)
	require.Empty(t, tasks)
}

// Agentless tasks obey their job's rate class like agents' tasks: with 20
// tokens a second and a burst of 1, four shards go out about 50 ms apart.
func TestHTTPTaskShardsHonourTheirRateClass(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	_, err := db.RateClassInsert(context.Background(), env.pool, &axtype.RateClass{Name: "slow-api", Rate: 20, Burst: 1})
	require.NoError(t, err)
	target := newReceiver(t, nil)
	job := env.httpJob(target.URL, func(j *axtype.Job) { j.ShardCount, j.RateLimitClass = 4, "slow-api" })
	exec := env.trigger(job.ID)
	env.eventually("succeeded", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	got := target.requests()
	require.Len(t, got, 4)
	require.GreaterOrEqual(t, got[3].at.Sub(got[0].at), 120*time.Millisecond, "3 tokens after the burst take 150 ms")
}

// A body template that renders past its limit (or uses range, saved
// before templates were bounded) fails its task with the reason and sends
// nothing; an HTTP job beside it is delivered as usual.
func TestHTTPTaskCostlyBodyTemplateIsStopped(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	target := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) bool { return false })
	big, err := json.Marshal(map[string]string{"s": strings.Repeat("<", 300<<10)})
	require.NoError(t, err)
	body := func(tmpl string) func(j *axtype.Job) {
		return func(j *axtype.Job) {
			j.Executor = axtype.ExecutorConfig{URL: target.URL + "/costly", Method: "POST", Body: tmpl}
			j.Params = big
		}
	}
	// Written as it is, unescaped: the cap is reached at the seventh
	// copy, with little work (10 copies through json escaped each '<' to
	// 6 bytes, and under the race detector on a loaded machine the render
	// ran into its 1 s limit before the size cap).
	capped := env.httpJob("", body(strings.Repeat("{{.params.s}}", 10)))
	looped := env.httpJob("", body(`{{range 200000}}{{json $.params.s}}{{end}}`))
	healthy := env.httpJob(target.URL+"/healthy", nil)
	execs := map[string]*axtype.Execution{"capped": env.trigger(capped.ID), "looped": env.trigger(looped.ID),
		"healthy": env.trigger(healthy.ID)}

	env.eventually("succeeded", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", execs["healthy"].ID)
	want := map[string]string{"capped": "output exceeds 2097152 bytes", "looped": "must not use range"}
	for name, msg := range want {
		env.eventually("failed", 10*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", execs[name].ID)
		var got string
		require.NoError(t, env.pool.QueryRow(context.Background(),
			"SELECT error FROM ax.all_tasks WHERE execution_id = $1", execs[name].ID).Scan(&got))
		require.Contains(t, got, msg, name)
	}
	require.Len(t, target.requests(), 1, "only the healthy job's request is sent")
}

// TestHeldHTTPTaskLooksLessOftenTheLongerItIsHeld: a request held below
// its rate class's priority floor looks again after about as long as it
// has been due, up to 10 s, not every second however long it is held;
// once the floor is lowered, it is sent at its next look.
func TestHeldHTTPTaskLooksLessOftenTheLongerItIsHeld(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	ctx := context.Background()
	floor := 5
	_, err := db.RateClassInsert(ctx, env.pool, &axtype.RateClass{Name: "degraded-api", Rate: 100, Burst: 100,
		ManualMinPriority: &floor})
	require.NoError(t, err)
	target := newReceiver(t, nil)
	job := env.httpJob(target.URL, func(j *axtype.Job) { j.RateLimitClass = "degraded-api" })
	exec := env.trigger(job.ID)
	nextLook := `SELECT extract(epoch FROM scheduled_at - now())::float8 FROM ax.river_job
		WHERE kind = 'ax_http_task' AND state = 'scheduled'`
	env.eventually(int64(1), 10*time.Second,
		"SELECT count(*) FROM ax.river_job WHERE kind = 'ax_http_task' AND state = 'scheduled'")

	// Due a minute ago: its next look is 10 s (and a quarter) away at most.
	_, err = env.pool.Exec(ctx, "UPDATE ax.task SET not_before = now() - interval '1 minute' WHERE execution_id = $1", exec.ID)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var next float64
		return env.pool.QueryRow(ctx, nextLook).Scan(&next) == nil && next > 5
	}, 10*time.Second, 50*time.Millisecond, "held a minute, it looks again in about 10 s")
	require.Empty(t, target.requests(), "held, nothing is sent")

	_, err = db.RateClassSetManualFloor(ctx, env.pool, "degraded-api", nil)
	require.NoError(t, err)
	env.eventually("succeeded", 20*time.Second, "SELECT state::text FROM ax.all_executions WHERE id = $1", exec.ID)
	require.Len(t, target.requests(), 1)
}
