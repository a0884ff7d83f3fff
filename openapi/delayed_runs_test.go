package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// delayedEnv is an API with a trigger loop whose clock the test sets, so
// runs come due without waiting.
type delayedEnv struct {
	*apiEnv
	clock *clock.Clock
	loop  *schedule.TriggerLoop
}

func setupDelayed(t *testing.T) *delayedEnv {
	env := setup(t)
	c := clock.New()
	return &delayedEnv{apiEnv: env, clock: c,
		loop: schedule.NewTriggerLoop(env.pool, nil, schedule.TriggerLoopConfig{FireAhead: -1, Clock: c})}
}

// fireAt fires the runs due at now and returns how many it claimed.
func (e *delayedEnv) fireAt(t *testing.T, now time.Time) int {
	t.Helper()
	e.clock.Set(now)
	n, err := e.loop.FireDueRuns(context.Background())
	require.NoError(t, err)
	return n
}

func (e *delayedEnv) manualJob(t *testing.T, name string, extra map[string]any) string {
	t.Helper()
	body := map[string]any{"name": name, "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}}
	for k, v := range extra {
		body[k] = v
	}
	return e.call("POST", "/v1/jobs", e.admin, body).must(t, http.StatusCreated)["id"].(string)
}

func (e *delayedEnv) triggerWithKey(key, jobID string, body map[string]any) *response {
	raw, err := json.Marshal(body)
	require.NoError(e.t, err)
	req, err := http.NewRequest("POST", e.url+"/v1/jobs/"+jobID+"/trigger", bytes.NewReader(raw))
	require.NoError(e.t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+e.admin)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	return e.do(req)
}

func (e *delayedEnv) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, v.(string))
	require.NoError(t, err)
	return at
}

// A trigger with delay_seconds is stored as a scheduled run: visible in
// the API and in ax.upcoming_hour, replayed by its key, and fired at its
// time as the execution with the same id.
func TestTriggerLaterFiresAsTheSameExecution(t *testing.T) {
	t.Parallel()
	env := setupDelayed(t)
	job := env.manualJob(t, "close-order", nil)
	body := map[string]any{"delay_seconds": 1800, "params": map[string]any{"order": 42}}
	before := time.Now()
	run := env.triggerWithKey("order-42", job, body).must(t, http.StatusAccepted)
	id := run["id"].(string)
	require.Equal(t, "scheduled", run["state"])
	require.Equal(t, "delayed", run["cause"])
	require.NotContains(t, run, "fired_at")
	runAt := parseTime(t, run["scheduled_for"])
	require.WithinDuration(t, before.Add(30*time.Minute), runAt, 5*time.Second)

	got := env.call("GET", "/v1/executions/"+id+"?wait=5s", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "scheduled", got["state"], "a scheduled run answers at once, even when waited for")
	listed := env.call("GET", "/v1/jobs/"+job+"/scheduled", env.admin, nil).must(t, http.StatusOK)["runs"].([]any)
	require.Len(t, listed, 1)
	require.Equal(t, id, listed[0].(map[string]any)["id"])
	require.Equal(t, 1, env.count(t, "SELECT count(*) FROM ax.upcoming_hour WHERE delayed_run_id = $1", id))

	replay := env.triggerWithKey("order-42", job, body).must(t, http.StatusAccepted)
	require.Equal(t, id, replay["id"], "the same key and body is the same run")
	other := env.triggerWithKey("order-42", job, map[string]any{"delay_seconds": 60})
	require.Equal(t, http.StatusUnprocessableEntity, other.status, string(other.raw))
	require.Equal(t, []string{"header.Idempotency-Key"}, other.errorLocations())
	require.Equal(t, 1, env.count(t, "SELECT count(*) FROM ax.delayed_run WHERE job_id = $1", job))

	require.Equal(t, 0, env.fireAt(t, runAt.Add(-time.Second)), "not before its time")
	require.Equal(t, 1, env.fireAt(t, runAt))
	fired := env.call("GET", "/v1/executions/"+id, env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "pending", fired["state"])
	require.Equal(t, "delayed", fired["cause"])
	require.Equal(t, false, fired["misfired"])
	require.True(t, parseTime(t, fired["scheduled_for"]).Equal(runAt))
	require.Equal(t, float64(42), fired["params"].(map[string]any)["order"])
	tasks := fired["tasks"].([]any)
	require.Len(t, tasks, 1)
	require.False(t, parseTime(t, tasks[0].(map[string]any)["not_before"]).Before(runAt.Truncate(time.Microsecond)))
	require.Equal(t, 0, env.count(t, "SELECT count(*) FROM ax.delayed_run WHERE id = $1", id))
	require.Equal(t, 0, env.fireAt(t, runAt.Add(time.Hour)), "it fires once")

	cancel := env.call("POST", "/v1/runs/cancel", env.admin, map[string]any{"idempotency_keys": []string{"order-42"}}).
		must(t, http.StatusOK)["results"].([]any)[0].(map[string]any)
	require.Equal(t, "fired", cancel["state"], "too late to cancel by key: it is an execution now")
	require.Equal(t, id, cancel["id"])
}

// Bad delays are refused, naming the field, and store nothing.
func TestTriggerLaterValidation(t *testing.T) {
	t.Parallel()
	env := setupDelayed(t)
	job := env.manualJob(t, "j", nil)
	for _, c := range []struct {
		name string
		body map[string]any
		loc  string
	}{
		{"both", map[string]any{"delay_seconds": 5, "run_at": time.Now().Add(time.Hour).Format(time.RFC3339)}, "body.delay_seconds"},
		{"too far", map[string]any{"run_at": time.Now().Add(500 * 24 * time.Hour).Format(time.RFC3339)}, "body.run_at"},
		{"negative", map[string]any{"delay_seconds": -1}, "body.delay_seconds"},
	} {
		r := env.triggerWithKey("", job, c.body)
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", c.name, r.raw)
		require.Contains(t, r.errorLocations(), c.loc, c.name)
	}
	require.Equal(t, 0, env.count(t, "SELECT count(*) FROM ax.delayed_run"))
}

// The batch form stores runs of several jobs in one transaction, replays
// keys, refuses a bad run by its index without storing any, and runs are
// cancelled by key or id before they fire.
func TestRunBatchAndCancel(t *testing.T) {
	t.Parallel()
	env := setupDelayed(t)
	a, b := env.manualJob(t, "a", nil), env.manualJob(t, "b", nil)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	batch := map[string]any{"runs": []map[string]any{
		{"job_id": a, "run_at": at.Format(time.RFC3339), "idempotency_key": "k1", "params": map[string]any{"n": 1}},
		{"job_id": b, "delay_seconds": 3600, "idempotency_key": "k2"},
		{"job_id": a, "run_at": at.Add(time.Minute).Format(time.RFC3339)},
	}}
	runs := env.call("POST", "/v1/runs/batch", env.admin, batch).must(t, http.StatusAccepted)["runs"].([]any)
	require.Len(t, runs, 3)
	ids := make([]string, 3)
	for i, r := range runs {
		ids[i] = r.(map[string]any)["id"].(string)
	}
	require.True(t, parseTime(t, runs[0].(map[string]any)["run_at"]).Equal(at))
	require.Equal(t, 3, env.count(t, "SELECT count(*) FROM ax.delayed_run"))

	// A key of the batch is the trigger call's key: the same run either way.
	replay := env.triggerWithKey("k1", a, map[string]any{"run_at": at.Format(time.RFC3339), "params": map[string]any{"n": 1}}).
		must(t, http.StatusAccepted)
	require.Equal(t, ids[0], replay["id"])

	for _, c := range []struct {
		name string
		runs []map[string]any
		loc  string
	}{
		{"reused key", []map[string]any{{"job_id": a, "delay_seconds": 10}, {"job_id": a, "delay_seconds": 99, "idempotency_key": "k1"}}, "body.runs[1].idempotency_key"},
		{"repeated key", []map[string]any{{"job_id": a, "idempotency_key": "x"}, {"job_id": b, "idempotency_key": "x"}}, "body.runs[1].idempotency_key"},
		{"unknown job", []map[string]any{{"job_id": a}, {"job_id": "0190a0a0-0000-7000-8000-000000000000"}}, "body.runs[1].job_id"},
		{"both times", []map[string]any{{"job_id": a, "delay_seconds": 1, "run_at": at.Format(time.RFC3339)}}, "body.runs[0].delay_seconds"},
		{"bad params", []map[string]any{{"job_id": a, "params": []int{1}}}, "body.runs[0].params"},
	} {
		r := env.call("POST", "/v1/runs/batch", env.admin, map[string]any{"runs": c.runs})
		require.Equal(t, http.StatusUnprocessableEntity, r.status, "%s: %s", c.name, r.raw)
		require.Contains(t, r.errorLocations(), c.loc, "%s: %s", c.name, r.raw)
	}
	tooMany := make([]map[string]any, 1001)
	for i := range tooMany {
		tooMany[i] = map[string]any{"job_id": a}
	}
	require.Equal(t, http.StatusUnprocessableEntity, env.call("POST", "/v1/runs/batch", env.admin, map[string]any{"runs": tooMany}).status)
	require.Equal(t, 3, env.count(t, "SELECT count(*) FROM ax.delayed_run"), "a refused batch stores nothing")

	// "The order was paid."
	res := env.call("POST", "/v1/runs/cancel", env.admin, map[string]any{"idempotency_keys": []string{"k1", "nope"}, "reason": "paid"}).
		must(t, http.StatusOK)["results"].([]any)
	require.Equal(t, "cancelled", res[0].(map[string]any)["state"])
	require.Equal(t, ids[0], res[0].(map[string]any)["id"])
	require.Equal(t, "not_found", res[1].(map[string]any)["state"])
	got := env.call("GET", "/v1/executions/"+ids[0], env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "cancelled", got["state"])
	require.Equal(t, "paid", got["cancel_reason"])
	again := env.call("POST", "/v1/runs/cancel", env.admin, map[string]any{"idempotency_keys": []string{"k1"}}).
		must(t, http.StatusOK)["results"].([]any)
	require.Equal(t, "cancelled", again[0].(map[string]any)["state"], "cancelling twice answers the same")
	// Keys belong to the API key that made them.
	other := env.key("submit")
	res = env.call("POST", "/v1/runs/cancel", other, map[string]any{"idempotency_keys": []string{"k2"}}).
		must(t, http.StatusOK)["results"].([]any)
	require.Equal(t, "not_found", res[0].(map[string]any)["state"])

	byID := env.call("POST", "/v1/executions/"+ids[2]+"/cancel", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "cancelled", byID["state"])

	require.Equal(t, 1, env.fireAt(t, at.Add(2*time.Hour)), "only the run not cancelled fires")
	require.Equal(t, "pending", env.call("GET", "/v1/executions/"+ids[1], env.admin, nil).must(t, http.StatusOK)["state"])
	for _, id := range []string{ids[0], ids[2]} {
		require.Equal(t, "cancelled", env.call("GET", "/v1/executions/"+id, env.admin, nil).must(t, http.StatusOK)["state"])
	}
}

// When ax was down at a run's time, the job's misfire policy decides; a
// run due while its job is paused waits for the resume; forbid skips an
// overlapping run and records it.
func TestDelayedRunsFollowTheJobsPolicies(t *testing.T) {
	t.Parallel()
	env := setupDelayed(t)
	skip := env.manualJob(t, "skip", map[string]any{"misfire": map[string]any{"policy": "skip"}})
	once := env.manualJob(t, "once", nil)
	window := env.manualJob(t, "window", map[string]any{"misfire": map[string]any{"window_seconds": 60}})
	paused := env.manualJob(t, "paused", nil)
	forbid := env.manualJob(t, "forbid", map[string]any{"concurrency_policy": "forbid"})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	var runs []map[string]any
	for _, j := range []string{skip, once, window, paused, forbid, forbid} {
		runs = append(runs, map[string]any{"job_id": j, "run_at": at.Format(time.RFC3339)})
	}
	res := env.call("POST", "/v1/runs/batch", env.admin, map[string]any{"runs": runs}).must(t, http.StatusAccepted)["runs"].([]any)
	id := func(i int) string { return res[i].(map[string]any)["id"].(string) }
	env.call("POST", "/v1/jobs/"+paused+"/pause", env.admin, nil).must(t, http.StatusOK)

	// ax comes back ten minutes after the runs' time.
	require.Equal(t, 6, env.fireAt(t, at.Add(10*time.Minute)))
	state := func(i int) map[string]any {
		return env.call("GET", "/v1/executions/"+id(i), env.admin, nil).must(t, http.StatusOK)
	}
	skipped := func(job string) []any {
		return env.call("GET", "/v1/jobs/"+job+"/skipped", env.admin, nil).must(t, http.StatusOK)["skipped"].([]any)
	}
	require.Equal(t, http.StatusNotFound, env.call("GET", "/v1/executions/"+id(0), env.admin, nil).status)
	s := skipped(skip)
	require.Len(t, s, 1)
	require.Equal(t, "misfire", s[0].(map[string]any)["reason"])
	require.Contains(t, s[0].(map[string]any)["detail"], id(0))
	require.Contains(t, s[0].(map[string]any)["detail"], "the misfire policy is skip")

	late := state(1)
	require.Equal(t, "pending", late["state"])
	require.Equal(t, true, late["misfired"], "fire_once fires a late run, marked misfired")

	require.Equal(t, http.StatusNotFound, env.call("GET", "/v1/executions/"+id(2), env.admin, nil).status)
	require.Contains(t, skipped(window)[0].(map[string]any)["detail"], "catch-up window")

	held := state(3)
	require.Equal(t, "scheduled", held["state"])
	require.Equal(t, true, held["held"])
	require.Equal(t, 0, env.fireAt(t, at.Add(11*time.Minute)), "a held run is not claimed again")
	env.call("POST", "/v1/jobs/"+paused+"/resume", env.admin, nil).must(t, http.StatusOK)
	require.Equal(t, 1, env.fireAt(t, at.Add(12*time.Minute)))
	resumed := state(3)
	require.Equal(t, "pending", resumed["state"])
	require.Equal(t, true, resumed["misfired"])

	first, second := env.call("GET", "/v1/executions/"+id(4), env.admin, nil), env.call("GET", "/v1/executions/"+id(5), env.admin, nil)
	require.Equal(t, []int{http.StatusOK, http.StatusNotFound}, []int{first.status, second.status},
		"of two overlapping runs of a forbid job, the first fires")
	s = skipped(forbid)
	require.Len(t, s, 1)
	require.Equal(t, "overlap", s[0].(map[string]any)["reason"])
	require.Contains(t, s[0].(map[string]any)["detail"], id(5))
}

// A run stored while the trigger loop sleeps wakes it: the run fires on
// time, not after the loop's next look.
func TestRunDueSoonWakesTheTriggerLoop(t *testing.T) {
	t.Parallel()
	env := setup(t)
	loop := schedule.NewTriggerLoop(env.pool, env.notifier, schedule.TriggerLoopConfig{MaxSleep: time.Minute})
	require.NoError(t, loop.Start(context.Background()))
	t.Cleanup(loop.Stop)
	job := (&delayedEnv{apiEnv: env}).manualJob(t, "soon", nil)
	time.Sleep(100 * time.Millisecond) // the loop is asleep, for up to a minute
	run := env.call("POST", "/v1/jobs/"+job+"/trigger", env.admin, map[string]any{"delay_seconds": 1}).must(t, http.StatusAccepted)
	runAt := parseTime(t, run["scheduled_for"])
	var got *response
	require.Eventually(t, func() bool {
		got = env.call("GET", "/v1/executions/"+run["id"].(string), env.admin, nil)
		return got.body["state"] == "pending"
	}, 10*time.Second, 20*time.Millisecond)
	firedAt := parseTime(t, got.body["fired_at"])
	require.Less(t, firedAt.Sub(runAt), 2*time.Second, fmt.Sprintf("fired at %s for %s", firedAt, runAt))
}

// Cancels of many keys at once, sent in parallel with the keys in other
// orders, each cancel every run once between them, all in one statement
// a call, without deadlocking each other.
func TestCancelManyKeysInParallel(t *testing.T) {
	t.Parallel()
	env := setupDelayed(t)
	job := env.manualJob(t, "orders", nil)
	const runs = 200
	keys := make([]string, runs)
	batch := make([]map[string]any, runs)
	for i := range batch {
		keys[i] = fmt.Sprintf("order-%d", i)
		batch[i] = map[string]any{"job_id": job, "delay_seconds": 3600, "idempotency_key": keys[i]}
	}
	env.call("POST", "/v1/runs/batch", env.admin, map[string]any{"runs": batch}).must(t, http.StatusAccepted)

	const callers = 8
	results := make([][]any, callers)
	var wg sync.WaitGroup
	for c := range callers {
		order := slices.Clone(keys)
		rand.New(rand.NewPCG(uint64(c), 1)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := env.call("POST", "/v1/runs/cancel", env.admin, map[string]any{"idempotency_keys": order})
			if r.status == http.StatusOK {
				results[c] = r.body["results"].([]any)
			} else {
				t.Errorf("caller %d: status %d: %s", c, r.status, r.raw)
			}
		}()
	}
	wg.Wait()
	for c, res := range results {
		require.Len(t, res, runs, "caller %d", c)
		for _, r := range res {
			require.Equal(t, "cancelled", r.(map[string]any)["state"], "caller %d: %v", c, r)
		}
	}
	require.Equal(t, runs, env.count(t, "SELECT count(*) FROM ax.delayed_run WHERE cancelled_at IS NOT NULL"))
	require.Zero(t, env.fireAt(t, time.Now().Add(2*time.Hour)), "nothing left to fire")
}
