package openapi_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
)

// Requests have a pool of their own: while the engine holds every
// connection of its pool (a burst of fires, leases and results), a job is
// still created and run through the API. With one pool the same calls
// wait for the engine.
func TestRequestsDoNotWaitForTheEngine(t *testing.T) {
	t.Parallel()
	var requests *pgxpool.Pool
	env := setupConfig(t, func(c *openapiConfig) {
		var err error
		requests, err = db.OpenPool(context.Background(), c.Services.Pool.Config().ConnString(), db.PoolSize{MaxConns: 2, MinConns: 2})
		require.NoError(t, err)
		t.Cleanup(requests.Close)
		c.Services.RequestPool = requests
	})
	shared := setup(t)
	for _, e := range []*apiEnv{env, shared} {
		holdAll(t, e.pool)
	}

	job := env.callWithin(t, 10*time.Second, "POST", "/v1/jobs", cronJob("while-busy", "0 0 8 * * ?", "UTC")).
		must(t, http.StatusCreated)
	env.callWithin(t, 10*time.Second, "POST", "/v1/jobs/"+job["id"].(string)+"/trigger", map[string]any{}).
		must(t, http.StatusAccepted)

	_, err := shared.tryWithin(time.Second, "POST", "/v1/jobs", cronJob("while-busy", "0 0 8 * * ?", "UTC"))
	require.ErrorIs(t, err, context.DeadlineExceeded, "one pool: the request waits for the engine")
}

// holdAll takes every connection of pool that is or becomes free until
// the test ends; it stops when none has come for a second (those left are
// held for good, as the notifier's LISTEN connection). Counting the free
// ones once left one to a request when the server's background work gave
// its back (a clean-clone CI run).
func holdAll(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pool.Acquire(ctx)
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		require.NoError(t, err)
		t.Cleanup(conn.Release)
	}
	require.Equal(t, pool.Stat().MaxConns(), pool.Stat().AcquiredConns())
}

// callWithin is call with the admin key that must answer within d.
func (e *apiEnv) callWithin(t *testing.T, d time.Duration, method, path string, body any) *response {
	t.Helper()
	res, err := e.tryWithin(d, method, path, body)
	require.NoError(t, err)
	return res
}

// tryWithin sends body with the admin key and gives up after d.
func (e *apiEnv) tryWithin(d time.Duration, method, path string, body any) (*response, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := e.request(method, path, e.admin, body)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return decodeResponse(resp)
}
