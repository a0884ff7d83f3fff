package openapi_test

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/outbound"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestOneKeysFloodWaitsItsTurn: the API's request pool has two
// connections. Key A sends 80 calls that each hold a connection until the
// test lets them go (they read a table the test has locked), then key B
// sends one. A's two running calls hold both turns; 64 more wait theirs
// and A's 14 after those are refused at once (429, Retry-After). When the
// lock goes, B's call has the second turn given, after one more of A's,
// not the 65th. (Without turns, B's call was answered last, 81st: the
// request pool hands connections out first come, first served, and B's
// call came after all of A's. Answers are not compared here: B's handler
// may be slower than several of A's quick ones, so B's answer can come
// after theirs even with the second turn.)
func TestOneKeysFloodWaitsItsTurn(t *testing.T) {
	pool := dbtest.New(t)
	cfg, err := pgxpool.ParseConfig(pool.Config().ConnString())
	require.NoError(t, err)
	cfg.MaxConns, cfg.MinConns = 2, 0
	requests, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(requests.Close)
	var (
		mu      sync.Mutex
		order   []string // "A" or "B" as answered 200
		refused []*response
		calls   sync.WaitGroup
		turns   []uuid.UUID // the keys given turns since B's call came
		counted bool
	)
	env := setupOn(t, pool, func(c *openapiConfig) {
		c.Services.RequestPool = requests
		c.RequestTurns = 2
		openapi.LogTurns(&c.Config, func(keyID uuid.UUID) {
			mu.Lock()
			defer mu.Unlock()
			if counted {
				turns = append(turns, keyID)
			}
		})
	})
	keyA := env.key(openapi.ScopeRead)
	keyB, b, err := queue.NewKeyService(pool).Create(context.Background(), "b", []string{openapi.ScopeRead}, queue.KeyLimits{})
	require.NoError(t, err)
	// Both keys known to the replica (its key cache), so B's call waits
	// for nothing but its turn.
	env.call("GET", "/v1/calendars", keyA, nil).must(t, http.StatusOK)
	env.call("GET", "/v1/jobs", keyB, nil).must(t, http.StatusOK)

	ctx := context.Background()
	lock, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer lock.Rollback(ctx) //nolint:errcheck // committed below; a failed test's lock goes
	_, err = lock.Exec(ctx, "LOCK TABLE ax.calendar IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)

	send := func(who, path, key string) {
		calls.Go(func() {
			r := env.callOffTest("GET", path, key, nil)
			mu.Lock()
			defer mu.Unlock()
			if r.status == http.StatusOK {
				order = append(order, who)
			} else {
				refused = append(refused, r)
			}
		})
	}
	for range 80 {
		send("A", "/v1/calendars", keyA)
	}
	var blocked int
	require.Eventually(t, func() bool {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&blocked))
		mu.Lock()
		defer mu.Unlock()
		return blocked == 2 && len(refused) == 14
	}, 10*time.Second, 10*time.Millisecond, "A's two running calls wait on the lock, 14 of A's are refused")
	for _, r := range refused {
		r.must(t, http.StatusTooManyRequests)
		require.Equal(t, "1", r.header.Get("Retry-After"))
		require.Contains(t, r.body["detail"], "64 requests waiting")
	}
	time.Sleep(200 * time.Millisecond) // A's calls are all waiting before B's comes
	mu.Lock()
	counted = true
	mu.Unlock()
	send("B", "/v1/jobs", keyB)
	time.Sleep(200 * time.Millisecond)
	require.NoError(t, lock.Commit(ctx))
	calls.Wait()

	require.Len(t, order, 67, "A's 66 calls that were not refused, and B's")
	require.Len(t, turns, 65, "A's 64 waiting calls and B's")
	require.Equal(t, b.ID, turns[1], "B's turn comes after one more of A's: %v", turns)
	require.Contains(t, order, "B")
}

// hangingResolver answers no lookup until release is closed.
type hangingResolver struct {
	asked   chan struct{}
	release chan struct{}
}

func (r *hangingResolver) LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error) {
	r.asked <- struct{}{}
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return []net.IPAddr{{IP: net.ParseIP("93.184.216.34")}}, nil
}

// TestANameLookupHoldsNoTurn: with one turn, key A saves a job whose
// callback names a host whose name server does not answer; while the
// lookup waits, key B's call is answered. A call gives its turn back
// while it looks names up (up to 10 s); holding it, B's call waited for
// the lookup.
func TestANameLookupHoldsNoTurn(t *testing.T) {
	resolver := &hangingResolver{asked: make(chan struct{}, 1), release: make(chan struct{})}
	env := setupConfig(t, func(c *openapiConfig) {
		c.RequestTurns = 1
		c.Outbound = outbound.Policy{Resolver: resolver}
	})
	keyA, keyB := env.key(openapi.ScopeAdmin), env.key(openapi.ScopeRead)
	env.call("GET", "/v1/jobs", keyB, nil).must(t, http.StatusOK) // B's key is known (cached)

	saved := make(chan *response, 1)
	go func() {
		job := cronJob("hooked", "0 0 * * *", "UTC")
		job["callback"] = map[string]any{"url": "https://slow-dns.example/hook"}
		saved <- env.callOffTest("POST", "/v1/jobs", keyA, job)
	}()
	<-resolver.asked

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := env.request("GET", "/v1/jobs", keyB, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	require.NoError(t, err, "B's call is answered while A's lookup waits")
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, resp.Body.Close())

	close(resolver.release)
	(<-saved).must(t, http.StatusCreated)
}

// callOffTest is call for a goroutine other than the test's, where
// require may not stop the test: it panics on a transport error.
func (e *apiEnv) callOffTest(method, path, key string, body any) *response {
	req, err := e.request(method, path, key, body)
	if err != nil {
		panic(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	r, err := decodeResponse(resp)
	if err != nil {
		panic(err)
	}
	return r
}
