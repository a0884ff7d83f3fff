package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// TestIdleLongPollCostsNoTransactions: an agent long-polling while a
// pending task it may not take exists (other labels; below its class's
// priority floor) costs at most one transaction a second, counted by
// Postgres (xact_commit of the test's own database), and still wakes
// promptly when a task it can take appears (a new task; the floor
// lifted): within 2 s of the change, not at the end of its 25 s wait
// (under 1 s on a quiet machine, 1.16 s seen in CI under load).
func TestIdleLongPollCostsNoTransactions(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		// blocked leaves a pending task the agent may not take and returns
		// what makes one takeable.
		blocked func(env *apiEnv) (wake func())
	}{
		{"other labels", func(env *apiEnv) func() {
			env.run(env.manualJob("gpu", func(j map[string]any) {
				j["target"] = map[string]any{"labels": map[string]string{"gpu": "yes"}}
			}), nil)
			plain := env.manualJob("plain", nil)
			return func() { env.run(plain, nil) }
		}},
		{"below class floor", func(env *apiEnv) func() {
			env.call("POST", "/v1/classes", env.admin, map[string]any{"name": "api", "rate": 100, "burst": 100}).
				must(t, http.StatusCreated)
			env.call("POST", "/v1/classes/api/degrade", env.admin, map[string]any{"min_priority": 5}).
				must(t, http.StatusOK)
			env.run(env.manualJob("low", func(j map[string]any) { j["priority"] = 1; j["rate_limit_class"] = "api" }), nil)
			return func() { env.call("POST", "/v1/classes/api/restore", env.admin, nil).must(t, http.StatusOK) }
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := setupFlow(t, dispatch.AgentConfig{})
			wake := tc.blocked(env)
			a := env.registerAgent("idle", nil, 10)

			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel) // ends the poll if the test stops early
			type leaseResult struct {
				tasks []any
				at    time.Time
				err   error
			}
			done := make(chan leaseResult, 1)
			go func() {
				tasks, err := a.leaseContext(ctx, 10, 25)
				done <- leaseResult{tasks, time.Now(), err}
			}()

			// The poll is waiting, and the notifier's LISTENs are counted:
			// a backend that stays connected reports its counts when idle,
			// up to 10 s late (PGSTAT_IDLE_INTERVAL), so on a loaded
			// machine they fell into the window.
			time.Sleep(max(1500*time.Millisecond, time.Until(env.listened.Add(11*time.Second))))
			counter := xactCounter(t, env)
			from := time.Now()
			before := counter()
			time.Sleep(6 * time.Second)
			spent := counter() - before
			// The window runs from the first count's start to the second's
			// end (each waits for the pool's backends to end): a loaded
			// machine stretches it, and a window of w seconds holds up to
			// floor(w)+1 ticks of a once-a-second check.
			window := time.Since(from)
			t.Logf("%d transactions in %s of an idle long poll", spent, window.Round(time.Millisecond))
			select {
			case r := <-done:
				t.Fatalf("the poll returned while nothing could be taken: %v %v", r.tasks, r.err)
			default:
			}
			require.LessOrEqual(t, spent, int64(window/time.Second)+1, "at most one transaction a second")

			// Timed from when the task became takeable (wake's calls
			// returned): under load wake's own API calls took over a second.
			wake()
			woken := time.Now()
			select {
			case r := <-done:
				require.NoError(t, r.err)
				require.Len(t, r.tasks, 1, "the poll gets the task it can take")
				require.Less(t, r.at.Sub(woken), 2*time.Second, "and promptly")
				t.Logf("woke %s after the task became takeable", r.at.Sub(woken).Round(time.Millisecond))
			case <-time.After(3 * time.Second):
				t.Fatal("the poll did not wake when a task it can take appeared")
			}
		})
	}
}

// xactCounter returns a reader of the transactions committed in env's
// database.
func xactCounter(t *testing.T, env *apiEnv) func() int64 {
	t.Helper()
	// Counted from the maintenance database, so that counting adds no
	// transaction to the count (nor one reported late).
	admin, err := pgx.Connect(context.Background(), dbtest.AdminURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { admin.Close(context.Background()) })
	database := env.pool.Config().ConnConfig.Database
	return func() int64 {
		t.Helper()
		// Idle backends report their counts up to 10 s late, but at once
		// when they end: close the pool's connections (a waiting poll
		// holds none) and wait until their backends are gone, so that
		// every transaction so far is counted. The notifier's LISTEN
		// connection stays.
		var pool []int32
		require.NoError(t, admin.QueryRow(context.Background(), `
			SELECT coalesce(array_agg(pid), '{}') FROM pg_stat_activity WHERE datname = $1
			       AND backend_type = 'client backend' AND query NOT LIKE 'LISTEN %'`,
			database).Scan(&pool))
		env.pool.Reset()
		require.Eventually(t, func() bool {
			var left int
			err := admin.QueryRow(context.Background(),
				`SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)`, pool).Scan(&left)
			return err == nil && left == 0
		}, 10*time.Second, 20*time.Millisecond, "the pool's backends end")
		var n int64
		// A transaction of its own, so the statistics are read afresh.
		require.NoError(t, admin.QueryRow(context.Background(),
			"SELECT xact_commit FROM pg_stat_database WHERE datname = $1", database).Scan(&n))
		return n
	}
}

// leaseContext is lease, ended with ctx.
func (a *agentClient) leaseContext(ctx context.Context, max, wait int) ([]any, error) {
	body, err := json.Marshal(map[string]any{"max": max, "wait_seconds": wait})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", a.env.url+"/v1/agents/"+a.id+"/lease", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out struct {
		Tasks []any `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out.Tasks, nil
}

// TestLongPollWakesWhenATaskBecomesLeasable: a waiting poll computes when
// the earliest task it could take becomes leasable and wakes then, with no
// notification and long before its fallback check (20 s here): when the
// steal delay of a task routed to another agent has passed, and when a dry
// rate class gets its next token.
func TestLongPollWakesWhenATaskBecomesLeasable(t *testing.T) {
	t.Parallel()
	cfg := dispatch.AgentConfig{StealAfter: time.Second, IdleRecheck: 20 * time.Second}
	t.Run("steal delay", func(t *testing.T) {
		t.Parallel()
		env := setupFlow(t, cfg)
		owner := env.registerAgent("owner", nil, 10)
		thief := env.registerAgent("thief", nil, 10)
		env.run(env.manualJob("routed", nil), nil)
		var routedAt time.Time
		require.NoError(t, env.pool.QueryRow(context.Background(),
			`UPDATE ax.task SET preferred_agent_id = $1, not_before = now() RETURNING not_before`,
			owner.id).Scan(&routedAt))
		tasks, err := thief.leaseContext(context.Background(), 10, 10)
		require.NoError(t, err)
		require.Len(t, tasks, 1, "the task is taken over")
		waited := time.Since(routedAt)
		t.Logf("taken over %s after it was routed (steal delay 1 s)", waited.Round(time.Millisecond))
		require.GreaterOrEqual(t, waited, 900*time.Millisecond, "not before the steal delay")
		require.Less(t, waited, 2500*time.Millisecond, "but soon after it")
	})
	t.Run("class token", func(t *testing.T) {
		t.Parallel()
		env := setupFlow(t, cfg)
		env.call("POST", "/v1/classes", env.admin, map[string]any{"name": "slow", "rate": 2, "burst": 1}).
			must(t, http.StatusCreated)
		job := env.manualJob("metered", func(j map[string]any) { j["rate_limit_class"] = "slow" })
		env.run(job, nil)
		env.run(job, nil)
		a := env.registerAgent("a", nil, 10)
		first, err := a.leaseContext(context.Background(), 10, 0)
		require.NoError(t, err)
		require.Len(t, first, 1, "the bucket holds one token")
		start := time.Now()
		second, err := a.leaseContext(context.Background(), 10, 10)
		require.NoError(t, err)
		require.Len(t, second, 1, "the next token comes at 2 a second")
		waited := time.Since(start)
		t.Logf("second task leased %s later (a token every 500 ms)", waited.Round(time.Millisecond))
		require.Less(t, waited, 1500*time.Millisecond)
	})
}
