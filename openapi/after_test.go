package openapi_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/schedule"
)

// afterEnv is a job graph under test: jobs by name, an agent that ends
// their runs, and a firer of ready downstream runs.
type afterEnv struct {
	*apiEnv
	agent *agentClient
	firer *schedule.AfterFirer
	ids   map[string]string
}

func setupAfter(t *testing.T) *afterEnv {
	env := setupWithAgents(t, dispatch.AgentConfig{})
	return &afterEnv{apiEnv: env, agent: env.registerAgent("a", nil, 100),
		firer: schedule.NewAfterFirer(env.pool, nil, schedule.AfterFirerConfig{}), ids: map[string]string{}}
}

// job creates etl/<name> with trigger (nil: manual) and params.
func (e *afterEnv) job(name string, trigger, params map[string]any) {
	e.t.Helper()
	if trigger == nil {
		trigger = map[string]any{"kind": "manual"}
	}
	body := map[string]any{"name": name, "group": "etl", "trigger": trigger, "params": params,
		"retry":    map[string]any{"max_attempts": 1},
		"executor": map[string]any{"kind": "shell", "command": "true"}}
	e.ids[name] = e.call("POST", "/v1/jobs", e.admin, body).must(e.t, http.StatusCreated)["id"].(string)
}

// tick fires the tick at of job name, as the trigger loop does.
func (e *afterEnv) tick(name string, at time.Time) string {
	e.t.Helper()
	id := uuid.Must(uuid.NewV7())
	inserted, err := dispatch.InsertExecutions(context.Background(), e.pool, nil, nil, []*axtype.NewExecution{{
		ID: id, JobID: uuid.MustParse(e.ids[name]), Cause: axtype.CauseSchedule, ScheduledFor: at}}, nil)
	require.NoError(e.t, err)
	require.Len(e.t, inserted, 1)
	return id.String()
}

// endAll leases every pending task and ends it as outcome says of its run
// ("" succeeds), with result {"rows": rows(run)}; then the firer makes
// the downstream runs that became ready. It returns how many it made.
func (e *afterEnv) endAll(outcome map[string]string, rows map[string]int) int {
	e.t.Helper()
	for {
		tasks := e.agent.lease(100, 0)
		if len(tasks) == 0 {
			break
		}
		for _, task := range tasks {
			run := task["execution_id"].(string)
			state := outcome[run]
			if state == "" {
				state = "succeeded"
			}
			e.agent.post("/complete", map[string]any{"results": []map[string]any{{
				"task_id": task["task_id"], "lease_token": task["lease_token"], "state": state,
				"result": map[string]any{"rows": rows[run]},
			}}}).must(e.t, http.StatusOK)
		}
	}
	n, err := e.firer.FireReady(context.Background())
	require.NoError(e.t, err)
	return n
}

// runsOf returns the runs of job name for logical time at (all causes).
func (e *afterEnv) runsOf(name string, at time.Time) []map[string]any {
	e.t.Helper()
	rows, err := e.pool.Query(context.Background(),
		"SELECT id::text FROM ax.all_executions WHERE job_id = $1 AND scheduled_for = $2 ORDER BY id", e.ids[name], at)
	require.NoError(e.t, err)
	var ids []string
	for rows.Next() {
		var id string
		require.NoError(e.t, rows.Scan(&id))
		ids = append(ids, id)
	}
	require.NoError(e.t, rows.Err())
	out := make([]map[string]any, len(ids))
	for i, id := range ids {
		out[i] = e.call("GET", "/v1/executions/"+id, e.admin, nil).must(e.t, http.StatusOK)
	}
	return out
}

func (e *afterEnv) explain(name string, at time.Time) map[string]any {
	e.t.Helper()
	return e.call("GET", "/v1/jobs/"+e.ids[name]+"/explain?at="+at.Format(time.RFC3339), e.admin, nil).must(e.t, http.StatusOK)
}

func after(mode string, on string, upstream ...string) map[string]any {
	var ups []map[string]any
	for _, u := range upstream {
		ups = append(ups, map[string]any{"job": "etl/" + u, "on": on})
	}
	return map[string]any{"kind": "after", "mode": mode, "upstream": ups}
}

// TestAfterRefusesBadGraphs: unknown upstreams, a job after itself and
// cycles are refused naming the field, and change nothing.
func TestAfterRefusesBadGraphs(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	e.job("a", nil, nil)
	e.job("b", after("all", "success", "a"), nil)
	e.job("c", after("all", "success", "b"), nil)
	count := func() (n int) {
		require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM ax.after_edge").Scan(&n))
		return n
	}
	require.Equal(t, 2, count())

	for name, c := range map[string]struct {
		method, path string
		trigger      map[string]any
		location     string
	}{
		"unknown upstream": {"POST", "/v1/jobs", after("all", "success", "a", "nope"), "body.trigger.upstream[1].job"},
		"not group/name":   {"POST", "/v1/jobs", map[string]any{"kind": "after", "upstream": []any{map[string]any{"job": "a"}}}, "body.trigger.upstream[0].job"},
		"no upstream":      {"POST", "/v1/jobs", map[string]any{"kind": "after"}, "body.trigger.upstream"},
		"unknown on":       {"POST", "/v1/jobs", after("all", "sometimes", "a"), "body.trigger.upstream[0].on"},
		"listed twice":     {"POST", "/v1/jobs", after("all", "success", "a", "a"), "body.trigger.upstream[1].job"},
		"upstream on cron": {"POST", "/v1/jobs", map[string]any{"kind": "cron", "cron": "0 0 * * *", "upstream": []any{map[string]any{"job": "etl/a"}}}, "body.trigger.upstream"},
		"cycle a→c→b→a":    {"PUT", "/v1/jobs/" + e.ids["a"], after("all", "success", "c"), "body.trigger.upstream"},
		"bad template":     {"POST", "/v1/jobs", after("all", "success", "a"), "body.params.deep[1]"},
		"after itself":     {"PUT", "/v1/jobs/" + e.ids["b"], after("all", "success", "b"), "body.trigger.upstream[0].job"},
	} {
		body := map[string]any{"name": "x", "group": "etl", "trigger": c.trigger,
			"executor": map[string]any{"kind": "shell", "command": "true"}}
		if name == "bad template" {
			body["params"] = map[string]any{"ok": "{{.upstream.a.result}}", "deep": []any{"x", "{{range .upstream}}{{end}}"}}
		}
		if c.method == "PUT" {
			got := e.call("GET", c.path, e.admin, nil).must(t, http.StatusOK)
			body["name"] = got["name"]
		}
		resp := e.call(c.method, c.path, e.admin, body)
		resp.must(t, http.StatusUnprocessableEntity)
		require.Contains(t, resp.errorLocations(), c.location, name)
	}
	require.Equal(t, 2, count(), "refused saves change nothing")
	a := e.call("GET", "/v1/jobs/"+e.ids["a"], e.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "manual", a["trigger"].(map[string]any)["kind"])

	graph := e.call("GET", "/v1/jobs/"+e.ids["b"]+"/graph", e.admin, nil).must(t, http.StatusOK)
	require.Equal(t, "etl/b", graph["job"])
	require.Equal(t, "all", graph["mode"])
	require.Equal(t, []any{map[string]any{"job_id": e.ids["a"], "job": "etl/a", "on": "success"}}, graph["upstream"])
	require.Equal(t, []any{map[string]any{"job_id": e.ids["c"], "job": "etl/c", "on": "success", "mode": "all"}}, graph["downstream"])
}

// TestAfterFiresOncePerLogicalTime: a load after three extracts (all)
// fires once per logical time when all three succeeded, with the logical
// time as its scheduled_for, its params rendered from an upstream's
// result, caused_by naming the three; a time with an extract missing
// waits (explain says on what); a failed extract records the time as
// skipped (upstream_failed, explain names the run); a job after any of
// two fires once, on the first. Re-running an upstream fires nothing
// again, unless with cascade.
func TestAfterFiresOncePerLogicalTime(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	for _, x := range []string{"ex1", "ex2", "ex3"} {
		e.job(x, nil, nil)
	}
	e.job("load", after("all", "success", "ex1", "ex2", "ex3"),
		map[string]any{"rows": "{{.upstream.ex1.result.rows}}", "day": "{{.logical_time}}", "fixed": 1})
	e.job("report", after("all", "completion", "load"), nil)
	e.job("first", after("any", "success", "ex1", "ex2"), nil)
	t1 := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	t2 := t1.Add(24 * time.Hour)

	runs := map[string]string{}
	for _, x := range []string{"ex1", "ex2", "ex3"} {
		runs[x+"@1"] = e.tick(x, t1)
	}
	runs["ex1@2"], runs["ex2@2"] = e.tick("ex1", t2), e.tick("ex2", t2)
	// Day 1's extracts and day 2's first two end: day 1's load and the
	// "any" job's two runs are made; day 2's load waits on ex3.
	require.Equal(t, 3, e.endAll(nil, map[string]int{runs["ex1@1"]: 42, runs["ex1@2"]: 7}))
	loads := e.runsOf("load", t1)
	require.Len(t, loads, 1)
	load := loads[0]
	require.Equal(t, "after", load["cause"])
	require.Equal(t, t1.Format(time.RFC3339), load["scheduled_for"])
	require.Equal(t, "42", load["params"].(map[string]any)["rows"], "rendered from ex1's result")
	require.Equal(t, t1.Format(time.RFC3339Nano), load["params"].(map[string]any)["day"])
	require.EqualValues(t, 1, load["params"].(map[string]any)["fixed"])
	var causes []string
	for _, c := range load["caused_by"].([]any) {
		c := c.(map[string]any)
		require.Equal(t, t1.Format(time.RFC3339), c["scheduled_for"], "never another day's run")
		causes = append(causes, c["job"].(string))
	}
	require.ElementsMatch(t, []string{"etl/ex1", "etl/ex2", "etl/ex3"}, causes)
	require.Empty(t, e.runsOf("load", t2))
	require.Len(t, e.runsOf("first", t1), 1)
	require.Len(t, e.runsOf("first", t2), 1)
	x := e.explain("load", t2)
	require.Equal(t, "waiting", x["verdict"])
	require.Contains(t, x["reason"], "waiting on etl/ex3")

	// Day 1's load ends: its report runs (after it, on completion).
	require.Equal(t, 1, e.endAll(map[string]string{load["id"].(string): "failed"}, nil))
	reports := e.runsOf("report", t1)
	require.Len(t, reports, 1)
	require.Equal(t, load["id"], reports[0]["caused_by"].([]any)[0].(map[string]any)["execution_id"])

	// Day 2's ex3 fails: day 2's load is a recorded skip naming the run.
	runs["ex3@2"] = e.tick("ex3", t2)
	require.Equal(t, 0, e.endAll(map[string]string{runs["ex3@2"]: "failed"}, nil))
	require.Empty(t, e.runsOf("load", t2))
	x = e.explain("load", t2)
	require.Equal(t, "skipped", x["verdict"])
	require.Equal(t, "upstream_failed", x["skip"].(map[string]any)["reason"])
	require.Contains(t, x["reason"], "skipped because upstream etl/ex3 run "+runs["ex3@2"]+" ended failed")
	skipped := e.call("GET", "/v1/jobs/"+e.ids["load"]+"/skipped", e.admin, nil).must(t, http.StatusOK)
	require.NotEmpty(t, skipped)

	// A re-run of ex3 (it succeeds) fires nothing without cascade...
	rerun := e.call("POST", "/v1/executions/"+runs["ex3@2"]+"/rerun", e.admin, map[string]any{"request_key": "plain"}).
		must(t, http.StatusAccepted)
	require.Equal(t, 0, e.endAll(nil, nil))
	require.Empty(t, e.runsOf("load", t2))
	// ...and fires day 2's load with it, after which the report follows.
	cascade := e.call("POST", "/v1/executions/"+runs["ex3@2"]+"/rerun", e.admin,
		map[string]any{"request_key": "cascade", "cascade": true}).must(t, http.StatusAccepted)
	require.NotEqual(t, rerun["id"], cascade["id"])
	require.Equal(t, 1, e.endAll(nil, nil))
	day2 := e.runsOf("load", t2)
	require.Len(t, day2, 1)
	require.Equal(t, "7", day2[0]["params"].(map[string]any)["rows"], "day 2's own extract, never day 1's")
	require.Equal(t, 1, e.endAll(nil, nil))
	require.Len(t, e.runsOf("report", t2), 1)

	// A cascading re-run of day 1's ex2 re-runs day 1's load, and its
	// report in turn; a plain re-run of ex1 does nothing.
	e.call("POST", "/v1/executions/"+runs["ex1@1"]+"/rerun", e.admin, map[string]any{"request_key": "plain"}).
		must(t, http.StatusAccepted)
	e.call("POST", "/v1/executions/"+runs["ex2@1"]+"/rerun", e.admin, map[string]any{"request_key": "c", "cascade": true}).
		must(t, http.StatusAccepted)
	require.Equal(t, 2, e.endAll(nil, nil), "day 1's load and first again")
	loads = e.runsOf("load", t1)
	require.Len(t, loads, 2)
	require.Equal(t, "rerun", loads[1]["cause"])
	require.Equal(t, load["id"], loads[1]["rerun_of"])
	require.Equal(t, 1, e.endAll(nil, nil))
	reports = e.runsOf("report", t1)
	require.Len(t, reports, 2)
	require.Equal(t, "rerun", reports[1]["cause"])
	require.Equal(t, 0, e.endAll(nil, nil))
	require.Len(t, e.runsOf("first", t1), 2, "any fired once, and once more by the cascade")
	require.False(t, strings.Contains(jsonOf(e.runsOf("load", t2)), t1.Format(time.RFC3339)))
}

// TestAfterWaitsThatFailGoBehindTheOthers: the firer takes two ready
// waits a pass. Two downstream jobs' fires fail every time (an injected
// fault); a third job's wait, ready after theirs, fires within two passes.
// The failing waits stayed the oldest ready ones and took every claim
// before: no other downstream job fired while they failed.
func TestAfterWaitsThatFailGoBehindTheOthers(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	e.firer = schedule.NewAfterFirer(e.pool, nil, schedule.AfterFirerConfig{BatchSize: 2})
	e.job("up", nil, nil)
	e.job("up2", nil, nil)
	e.job("bad1", after("all", "success", "up"), nil)
	e.job("bad2", after("all", "success", "up"), nil)
	e.job("good", after("all", "success", "up2"), nil)
	_, err := e.pool.Exec(context.Background(), `
		CREATE FUNCTION public.poison_run() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.job_id IN ('`+e.ids["bad1"]+`', '`+e.ids["bad2"]+`') THEN
				RAISE EXCEPTION 'injected fault' USING ERRCODE = '22003';
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER poison BEFORE INSERT ON ax.execution FOR EACH ROW EXECUTE FUNCTION public.poison_run()`)
	require.NoError(t, err)
	at := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	e.tick("up", at)
	require.Zero(t, e.endAll(nil, nil), "the two failing waits")
	e.tick("up2", at)
	made := e.endAll(nil, nil)
	for range 2 {
		n, err := e.firer.FireReady(context.Background())
		require.NoError(t, err)
		made += n
	}
	require.Equal(t, 1, made)
	require.Len(t, e.runsOf("good", at), 1)
	require.Empty(t, e.runsOf("bad1", at))
	require.Empty(t, e.runsOf("bad2", at))
}

// TestAJobHasAtMostItsDownstreamJobs: each end of a run of a job updates
// the wait of every job after it, inside the statement that ends other
// jobs' runs too, so a job has at most axtype.MaxAfterDownstreams. The
// next is refused naming its upstream (and changes nothing); a job already
// after it may still be saved, and another upstream takes the new job.
func TestAJobHasAtMostItsDownstreamJobs(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	e.job("up", nil, nil)
	e.job("other", nil, nil)
	for i := range axtype.MaxAfterDownstreams {
		e.job(fmt.Sprintf("down%d", i), after("all", "success", "up"), nil)
	}
	edges := func() (n int) {
		require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM ax.after_edge").Scan(&n))
		return n
	}
	require.Equal(t, axtype.MaxAfterDownstreams, edges())
	body := map[string]any{"name": "one-more", "group": "etl", "trigger": after("all", "success", "other", "up"),
		"executor": map[string]any{"kind": "shell", "command": "true"}}
	resp := e.call("POST", "/v1/jobs", e.admin, body)
	resp.must(t, http.StatusUnprocessableEntity)
	require.Contains(t, resp.errorLocations(), "body.trigger.upstream[1].job")
	require.Contains(t, string(resp.raw), "already has 100 downstream jobs")
	require.Equal(t, axtype.MaxAfterDownstreams, edges(), "refused: nothing changed")

	body["name"], body["trigger"] = "down0", after("any", "completion", "up")
	e.call("PUT", "/v1/jobs/"+e.ids["down0"], e.admin, body).must(t, http.StatusOK)
	e.job("one-more", after("all", "success", "other"), nil)
	require.Equal(t, axtype.MaxAfterDownstreams+1, edges())

	// An upstream past the bound (made before it was set) keeps its
	// downstream jobs, and each may still be saved: only a new edge to it
	// is refused.
	_, err := e.pool.Exec(context.Background(), `INSERT INTO ax.after_edge (job_id, upstream_job_id, position, on_state)
		VALUES ($1, $2, 1, 'success')`, e.ids["one-more"], e.ids["up"])
	require.NoError(t, err)
	body["trigger"] = after("all", "success", "up")
	e.call("PUT", "/v1/jobs/"+e.ids["down0"], e.admin, body).must(t, http.StatusOK)
}

// TestADownstreamPassWritesAtMostItsTasks: five downstream jobs of four
// shards each become ready together; under a bound of 10 tasks a pass
// makes two runs (8 tasks), leaving the others ready for the next. With no
// bound one pass made all five: 100 waits of jobs of 10,000 shards wrote a
// million tasks in one transaction, past a statement timeout, and the
// failed pass held the same waits again.
func TestADownstreamPassWritesAtMostItsTasks(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	e.firer = schedule.NewAfterFirer(e.pool, nil, schedule.AfterFirerConfig{MaxTasks: 10})
	e.job("up", nil, nil)
	for i := range 5 {
		name := fmt.Sprintf("down%d", i)
		body := map[string]any{"name": name, "group": "etl", "trigger": after("all", "success", "up"),
			"shards":   map[string]any{"count": 4},
			"executor": map[string]any{"kind": "shell", "command": "true"}}
		e.ids[name] = e.call("POST", "/v1/jobs", e.admin, body).must(t, http.StatusCreated)["id"].(string)
	}
	at := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	e.tick("up", at)
	made := []int{e.endAll(nil, nil)}
	for range 3 {
		n, err := e.firer.FireReady(context.Background())
		require.NoError(t, err)
		made = append(made, n)
	}
	require.Equal(t, []int{2, 2, 1, 0}, made)
	for i := range 5 {
		require.Len(t, e.runsOf(fmt.Sprintf("down%d", i), at), 1)
	}
}

// TestALimitedKeyNamesNoUpstreamOutsideItsGroups: a downstream job's
// params render its upstreams' results, so a key limited to group etl may
// not make a job run after ops/secret: refused as if there were no such
// job (as ops/missing is), in a job's create and update and in a
// declaration. An upstream in its own group is taken.
func TestALimitedKeyNamesNoUpstreamOutsideItsGroups(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	e.call("POST", "/v1/jobs", e.admin, map[string]any{"name": "secret", "group": "ops", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}}).must(t, http.StatusCreated)
	e.job("src", nil, nil)
	limited := e.limitedKey(queue.KeyLimits{Groups: []string{"etl"}}, openapi.ScopeSubmit)
	job := func(name, upstream string) map[string]any {
		return map[string]any{"name": name, "group": "etl",
			"trigger":  map[string]any{"kind": "after", "mode": "all", "upstream": []map[string]any{{"job": upstream, "on": "success"}}},
			"params":   map[string]any{"copy": `{{index .upstream "` + upstream + `" "result"}}`},
			"executor": map[string]any{"kind": "shell", "command": "true"}}
	}
	refused := func(r *response, at, name string) {
		t.Helper()
		r.must(t, http.StatusUnprocessableEntity)
		require.Equal(t, []string{at}, r.errorLocations())
		require.Contains(t, fmt.Sprint(r.body["errors"]), fmt.Sprintf("names no job: %q", name))
	}
	refused(e.call("POST", "/v1/jobs", limited, job("reader", "ops/secret")), "body.trigger.upstream[0].job", "ops/secret")
	refused(e.call("POST", "/v1/jobs", limited, job("reader", "ops/missing")), "body.trigger.upstream[0].job", "ops/missing")
	id := e.call("POST", "/v1/jobs", limited, job("reader", "etl/src")).must(t, http.StatusCreated)["id"].(string)
	refused(e.call("PUT", "/v1/jobs/"+id, limited, job("reader", "ops/secret")), "body.trigger.upstream[0].job", "ops/secret")
	refused(e.call("POST", "/v1/declarations", limited, declaration("etl-set", "1", false, job("decl", "ops/secret"))),
		"body.jobs[0].trigger.upstream[0].job", "ops/secret")
	var edges int
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM ax.after_edge").Scan(&edges))
	require.Equal(t, 1, edges, "only etl/reader after etl/src")
}

// TestACascadeMakesAtMostItsBoundOfReruns: C runs after B1, B2 and B3,
// which run after A; D runs after C. A cascading re-run of A re-runs the
// three Bs, and C once for each of them as they end one by one, and D once
// for each C: 9 re-runs from one call, w^(depth-1) through deeper graphs.
// Under a bound of 4 the cascade makes the Bs and the first C, and records
// the rest as skipped (cascade_bound) naming the cascade's root.
func TestACascadeMakesAtMostItsBoundOfReruns(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	e.firer = schedule.NewAfterFirer(e.pool, nil, schedule.AfterFirerConfig{MaxCascadeReruns: 4})
	e.job("a", nil, nil)
	for _, b := range []string{"b1", "b2", "b3"} {
		e.job(b, after("all", "success", "a"), nil)
	}
	e.job("c", after("all", "success", "b1", "b2", "b3"), nil)
	e.job("d", after("all", "success", "c"), nil)
	t1 := time.Date(2026, 12, 3, 2, 0, 0, 0, time.UTC)
	run := e.tick("a", t1)
	for e.endAll(nil, nil) > 0 {
	}
	require.Len(t, e.runsOf("d", t1), 1, "the graph ran once")

	root := e.call("POST", "/v1/executions/"+run+"/rerun", e.admin, map[string]any{"request_key": "c", "cascade": true}).
		must(t, http.StatusAccepted)["id"].(string)
	// One task at a time, the firer after each: the Bs end apart.
	for {
		tasks := e.agent.lease(1, 0)
		if len(tasks) == 0 {
			break
		}
		e.agent.post("/complete", map[string]any{"results": []map[string]any{{
			"task_id": tasks[0]["task_id"], "lease_token": tasks[0]["lease_token"], "state": "succeeded"}}}).
			must(t, http.StatusOK)
		_, err := e.firer.FireReady(context.Background())
		require.NoError(t, err)
	}
	reruns := func(name string) int { return len(e.runsOf(name, t1)) - 1 }
	require.Equal(t, []int{1, 1, 1, 1, 0}, []int{reruns("b1"), reruns("b2"), reruns("b3"), reruns("c"), reruns("d")})
	var skips []string
	for _, name := range []string{"c", "d"} {
		for _, s := range e.call("GET", "/v1/jobs/"+e.ids[name]+"/skipped", e.admin, nil).must(t, http.StatusOK)["skipped"].([]any) {
			s := s.(map[string]any)
			require.Equal(t, "cascade_bound", s["reason"])
			require.Contains(t, s["detail"], "the cascade of re-run "+root)
			skips = append(skips, name)
		}
	}
	require.Equal(t, []string{"c", "c", "d"}, skips)
}

// TestAfterWaitsPastTheHorizonArePruned: the cleanup deletes a
// downstream job's waits for logical times past the history horizon (32
// days by default), once their run, if they made one, is gone too; a
// recent wait stays. Explain then says that no record is kept of such a
// time rather than "waiting", and an upstream backfilled for it makes a
// new wait, whose downstream runs for it again (as a cron job's backfill
// fills a tick whose run retention removed).
func TestAfterWaitsPastTheHorizonArePruned(t *testing.T) {
	t.Parallel()
	e := setupAfter(t)
	ctx := context.Background()
	e.job("ex1", nil, nil)
	e.job("ex2", nil, nil)
	e.job("load", after("all", "success", "ex1", "ex2"), nil)
	today := time.Now().UTC().Truncate(time.Hour)
	old, older, recent := today.Add(-40*24*time.Hour), today.Add(-39*24*time.Hour), today.Add(-24*time.Hour)

	e.tick("ex1", old)
	e.tick("ex2", old)
	require.Equal(t, 1, e.endAll(nil, nil), "the old time's load")
	require.Equal(t, 0, e.endAll(nil, nil), "its load ends")
	loads := e.runsOf("load", old)
	require.Len(t, loads, 1)
	e.tick("ex1", older)
	e.tick("ex1", recent)
	require.Equal(t, 0, e.endAll(nil, nil), "both wait on ex2")
	_, err := e.pool.Exec(ctx, `UPDATE ax.after_wait SET updated_at = now() - interval '40 days'
		WHERE logical_time = ANY($1)`, []time.Time{old, older})
	require.NoError(t, err)

	pruned, err := db.PruneGone(ctx, e.pool, db.PruneBatch)
	require.NoError(t, err)
	require.Equal(t, db.Pruned{AfterWaits: 1}, pruned, "the older time's wait; the old one's run is in history")
	_, err = e.pool.Exec(ctx, `DELETE FROM ax.execution_history WHERE id = $1`, loads[0]["id"]) // as retention would
	require.NoError(t, err)
	pruned, err = db.PruneGone(ctx, e.pool, db.PruneBatch)
	require.NoError(t, err)
	require.Equal(t, db.Pruned{AfterWaits: 1}, pruned, "the old time's wait, its run gone")
	var left []time.Time
	rows, err := e.pool.Query(ctx, `SELECT logical_time FROM ax.after_wait`)
	require.NoError(t, err)
	for rows.Next() {
		var at time.Time
		require.NoError(t, rows.Scan(&at))
		left = append(left, at.UTC())
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []time.Time{recent}, left)

	x := e.explain("load", older)
	require.Equal(t, "no_record", x["verdict"])
	require.Contains(t, x["reason"], "older than the longest history retention")
	x = e.explain("load", recent)
	require.Equal(t, "waiting", x["verdict"])
	require.Contains(t, x["reason"], "waiting on etl/ex2")

	e.tick("ex1", old)
	e.tick("ex2", old)
	require.Equal(t, 1, e.endAll(nil, nil), "backfilled upstreams run the old time's load again")
	require.Len(t, e.runsOf("load", old), 1)
}
