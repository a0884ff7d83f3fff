package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// Concurrency keys (issue #41 item 6) on real processes: ax serve, three
// ax-agent processes and Postgres.

// TestConcurrencyKeyLimitAndTurns: 3 customers × 10 runs of a job whose
// key is the customer, limit 2, on 3 agents of capacity 1 (3 places: one
// customer alone would take all 3). All of acme's runs are made first,
// then bob's, then carol's, so plain oldest-first leasing would run acme
// to the end before carol started. Sampling the task rows while they run:
// never more than 2 of a key leased or running; every key has a finished
// run before any key has finished all 10 (keys take turns); and a waiting
// task is named in ax.tasks_without_agent with its key.
func TestConcurrencyKeyLimitAndTurns(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	jobID := s.CreateJob(t, map[string]any{
		"name": "per-customer", "trigger": e2ekit.Manual, "executor": e2ekit.Shell("sleep 0.2"),
		"concurrency": map[string]any{"key": "customer={{.params.customer}}", "limit": 2},
	})
	pool := e2ekit.OpenPool(t, s.DBURL)
	ctx := context.Background()

	// Sample until every run has ended.
	var mu sync.Mutex
	most := map[string]int{}
	var reasons []string
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			rows, err := pool.Query(ctx, `SELECT concurrency_key, count(*)::int FROM ax.task
				WHERE concurrency_key IS NOT NULL AND state IN ('leased', 'running') GROUP BY 1`)
			if err != nil {
				continue // the test's end may close the pool first
			}
			mu.Lock()
			for rows.Next() {
				var key string
				var n int
				if rows.Scan(&key, &n) == nil {
					most[key] = max(most[key], n)
				}
			}
			mu.Unlock()
			rows.Close()
			var reason string
			if pool.QueryRow(ctx, `SELECT reason FROM ax.tasks_without_agent
				WHERE reason LIKE 'concurrency key %' LIMIT 1`).Scan(&reason) == nil {
				mu.Lock()
				reasons = append(reasons, reason)
				mu.Unlock()
			}
		}
	}()

	// The whole backlog is made before any agent runs (firing one by one
	// takes longer than acme's runs would).
	customers := []string{"acme", "bob", "carol"}
	var ids []string
	for _, c := range customers {
		for range 10 {
			ids = append(ids, s.Fire(t, jobID, map[string]any{"customer": c}))
		}
	}
	for _, name := range []string{"k1", "k2", "k3"} {
		s.RunAgent(t, name, s.URL, "AX_AGENT_CAPACITY=1")
	}
	for _, id := range ids {
		require.Equal(t, "succeeded", s.WaitExecution(t, id, 120*time.Second), "run %s", id)
	}
	close(stop)
	<-sampled

	mu.Lock()
	defer mu.Unlock()
	for _, c := range customers {
		key := "customer=" + c
		require.LessOrEqual(t, most[key], 2, "key %s: at most 2 leased or running at once", key)
		require.Positive(t, most[key], "key %s was sampled running", key)
	}
	require.NotEmpty(t, reasons, "ax.tasks_without_agent named a key at its limit")
	require.Regexp(t, `^concurrency key customer=(acme|bob|carol) at limit 2$`, reasons[0])

	// Keys took turns: each key's first finished run came before the
	// moment the first key had finished all of its 10.
	first, last := map[string]time.Time{}, map[string]time.Time{}
	rows, err := pool.Query(ctx, `SELECT concurrency_key, min(finished_at), max(finished_at)
		FROM (SELECT concurrency_key, finished_at, job_id FROM ax.task
		      UNION ALL SELECT concurrency_key, finished_at, job_id FROM ax.task_history) t
		WHERE job_id = $1 GROUP BY 1`, jobID)
	require.NoError(t, err)
	for rows.Next() {
		var key string
		var lo, hi time.Time
		require.NoError(t, rows.Scan(&key, &lo, &hi))
		first[key], last[key] = lo, hi
	}
	require.NoError(t, rows.Err())
	require.Len(t, first, 3, "every run's task is in history with its key")
	var firstDone time.Time
	for _, hi := range last {
		if firstDone.IsZero() || hi.Before(firstDone) {
			firstDone = hi
		}
	}
	for key, lo := range first {
		require.True(t, lo.Before(firstDone), "key %s finished a run (%s) before any key finished all 10 (%s)",
			key, lo.Format(time.RFC3339Nano), firstDone.Format(time.RFC3339Nano))
	}
}

// TestConcurrencyGroupSharedAcrossJobs: two jobs of concurrency group
// "exports", limit 1. A run of the first for customer acme holds the
// key; a run of the second for acme waits (ax.tasks_without_agent and
// ax_concurrency_keys_at_limit say so) while a run of the second for bob
// runs at once; when the first ends, the waiting one runs.
func TestConcurrencyGroupSharedAcrossJobs(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	for _, name := range []string{"g1", "g2", "g3"} {
		s.RunAgent(t, name, s.URL, "AX_AGENT_CAPACITY=2")
	}
	for _, name := range []string{"g1", "g2", "g3"} {
		s.AgentReady(t, name)
	}
	dir := e2ekit.TaskDir(t)
	gate := filepath.Join(dir, "go")
	concurrency := map[string]any{"key": "customer={{.params.customer}}", "limit": 1, "group": "exports"}
	// The first job's run says it started and waits for the gate.
	holder := s.CreateJob(t, map[string]any{
		"name": "export-full", "trigger": e2ekit.Manual, "concurrency": concurrency,
		"executor": e2ekit.Shell(`touch ` + filepath.Join(dir, "held") + `; while [ ! -f ` + gate + ` ]; do sleep 0.05; done`),
	})
	other := s.CreateJob(t, map[string]any{
		"name": "export-delta", "trigger": e2ekit.Manual, "concurrency": concurrency,
		"executor": e2ekit.Shell(`touch ` + dir + `/ran-$AX_EXECUTION_ID`),
	})
	held := s.Fire(t, holder, map[string]any{"customer": "acme"})
	e2ekit.WaitFile(t, filepath.Join(dir, "held"), 60*time.Second)
	waiting := s.Fire(t, other, map[string]any{"customer": "acme"})
	free := s.Fire(t, other, map[string]any{"customer": "bob"})
	require.Equal(t, "succeeded", s.WaitExecution(t, free, 60*time.Second), "another key of the group runs at once")

	pool := e2ekit.OpenPool(t, s.DBURL)
	ctx := context.Background()
	var reason string
	require.Eventually(t, func() bool {
		return pool.QueryRow(ctx, `SELECT reason FROM ax.tasks_without_agent WHERE execution_id = $1`,
			waiting).Scan(&reason) == nil
	}, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, "concurrency key customer=acme of group default/exports at limit 1", reason)
	require.Eventually(t, func() bool {
		m, err := tryScrape(s.URL)
		return err == nil && m[`ax_concurrency_keys_at_limit{scope="group:default/exports"}`] == 1 &&
			m[`ax_concurrency_waiting_tasks{scope="group:default/exports"}`] == 1
	}, 30*time.Second, 100*time.Millisecond, "the metric shows the group's key at its limit")
	var state string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state::text FROM ax.task WHERE execution_id = $1`, waiting).Scan(&state))
	require.Equal(t, "pending", state, "the other job's run for acme waits for the key")
	_, err := os.Stat(filepath.Join(dir, "ran-"+waiting))
	require.True(t, os.IsNotExist(err), "it has not run")

	require.NoError(t, os.WriteFile(gate, nil, 0o600))
	require.Equal(t, "succeeded", s.WaitExecution(t, held, 60*time.Second))
	require.Equal(t, "succeeded", s.WaitExecution(t, waiting, 60*time.Second), "the waiting run runs once the key is free")

	// A run whose key does not render (no customer param) fails at once,
	// without running, with the error code and the reason.
	broken := s.Fire(t, other, map[string]any{"region": "eu"})
	require.Equal(t, "failed", s.WaitExecution(t, broken, 60*time.Second))
	var code, msg string
	require.NoError(t, pool.QueryRow(ctx, `SELECT error_code, error FROM ax.all_tasks WHERE execution_id = $1`,
		broken).Scan(&code, &msg))
	require.Equal(t, "concurrency_key_invalid", code)
	require.Contains(t, msg, `concurrency key "customer={{.params.customer}}"`)
	_, err = os.Stat(filepath.Join(dir, "ran-"+broken))
	require.True(t, os.IsNotExist(err), "it did not run")

	// A key outside the template subset is refused, naming the field, and
	// makes no job.
	status, problem := s.API(t, "POST", "/v1/jobs", map[string]any{
		"name": "bad-key", "trigger": e2ekit.Manual, "executor": e2ekit.Shell("true"),
		"concurrency": map[string]any{"key": "{{range .params}}x{{end}}", "limit": 1},
	})
	require.Equal(t, http.StatusUnprocessableEntity, status, problem)
	require.Contains(t, fmt.Sprint(problem["errors"]), "body.concurrency.key")
	_, jobs := s.API(t, "GET", "/v1/jobs?name=bad-key", nil)
	require.NotContains(t, fmt.Sprint(jobs), "bad-key")
}
