package openapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestIdleLongPollCostsNoTransactions: an agent long-polling while a
// pending task it may not take exists (other labels; below its class's
// priority floor) costs the database at most one statement a second,
// counted at the API's pool (every connection the server has, the
// notifier's included), and still wakes promptly when a task it can take
// appears (a new task; the floor lifted): within 2 s of the change, not
// at the end of its 25 s wait (under 1 s on a quiet machine, 1.16 s seen
// in CI under load).
//
// The idle window is the poll's own: from its check that found nothing
// to its next (IdleRecheck, 3 s here), each seen as it starts, so the test
// waits on the poll rather than on a clock, and shows the recheck comes.
func TestIdleLongPollCostsNoTransactions(t *testing.T) {
	t.Parallel()
	const idleRecheck = 3 * time.Second
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
			statements := &statementLog{}
			env := setupOn(t, tracedPool(t, statements), func(c *openapiConfig) {
				c.Services.Agent = dispatch.AgentConfig{IdleRecheck: idleRecheck}
			})
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
			asked := time.Now()
			go func() {
				tasks, err := a.leaseContext(ctx, 10, 25)
				done <- leaseResult{tasks, time.Now(), err}
			}()

			// The poll checks, finds nothing it may take and waits; its
			// next check opens the window's end.
			checked := statements.waitFor(t, "TaskNextLeasable", asked, 10*time.Second)
			rechecked := statements.waitFor(t, "TaskNextLeasable", checked.Add(time.Nanosecond), idleRecheck+10*time.Second)
			window := rechecked.Sub(checked)
			spent := statements.between(checked, rechecked)
			t.Logf("%d statements in %s of an idle long poll", spent, window.Round(time.Millisecond))
			select {
			case r := <-done:
				t.Fatalf("the poll returned while nothing could be taken: %v %v", r.tasks, r.err)
			default:
			}
			require.GreaterOrEqual(t, window, time.Second, "the idle poll checks again no sooner than a second")
			// A window of w seconds holds up to floor(w)+1 ticks of a
			// once-a-second check.
			require.LessOrEqual(t, spent, int(window/time.Second)+1, "at most one statement a second")

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

// tracedPool is a pool on a new database whose connections report every
// statement to statements.
func tracedPool(t *testing.T, statements *statementLog) *pgxpool.Pool {
	t.Helper()
	pool, err := db.OpenPoolWith(context.Background(), dbtest.NewURL(t), db.PoolOptions{Tracer: statements})
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// statementLog records when each statement (or batch, one round trip)
// of its connections starts, and wakes those waiting for one.
type statementLog struct {
	mu      sync.Mutex
	changed chan struct{} // closed and replaced at each statement
	seen    []loggedStatement
}

type loggedStatement struct {
	at   time.Time
	name string // the sqlc name, or the statement's first word
}

func (l *statementLog) record(sql string) {
	name := strings.TrimPrefix(sql, "-- name: ")
	name, _, _ = strings.Cut(strings.TrimSpace(name), " ")
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, loggedStatement{at: time.Now(), name: name})
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// TraceQueryStart implements pgx.QueryTracer.
func (l *statementLog) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	l.record(data.SQL)
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (l *statementLog) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart implements pgx.BatchTracer: a batch is one round trip.
func (l *statementLog) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	l.record("batch")
	return ctx
}

// TraceBatchQuery implements pgx.BatchTracer.
func (l *statementLog) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// TraceBatchEnd implements pgx.BatchTracer.
func (l *statementLog) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// waitFor returns when the first statement named name that started at
// or after since started, waiting up to wait for it.
func (l *statementLog) waitFor(t *testing.T, name string, since time.Time, wait time.Duration) time.Time {
	t.Helper()
	timeout := time.After(wait)
	for {
		l.mu.Lock()
		for _, s := range l.seen {
			if s.name == name && !s.at.Before(since) {
				l.mu.Unlock()
				return s.at
			}
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no %s statement within %s", name, wait)
		}
	}
}

// between counts the statements that started strictly between from and to.
func (l *statementLog) between(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.seen {
		if s.at.After(from) && s.at.Before(to) {
			n++
		}
	}
	return n
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
