package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/webhook"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// testEnv is a Receiver served on loopback over a database of its own.
type testEnv struct {
	t        *testing.T
	pool     *pgxpool.Pool
	receiver *Receiver
	url      string
	secret   webhook.Secret
}

func setup(t *testing.T) *testEnv {
	t.Helper()
	pool := dbtest.New(t)
	receiver := NewReceiver(pool, slog.New(slog.DiscardHandler))
	require.NoError(t, receiver.Migrate(context.Background()))
	secret := webhook.NewSecret()
	srv := httptest.NewServer(receiver.Handler(&webhook.Verifier{Secrets: []webhook.Secret{secret}}))
	t.Cleanup(srv.Close)
	return &testEnv{t: t, pool: pool, receiver: receiver, url: srv.URL, secret: secret}
}

// deliver posts body as message id, signed now as a sender's retry would
// be (same id, fresh timestamp), and returns the answer.
func (e *testEnv) deliver(id, body string) (int, string) {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
	require.NoError(e.t, err)
	require.NoError(e.t, webhook.Sign(req.Header, id, time.Now(), []byte(body), e.secret))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return resp.StatusCode, strings.TrimSpace(string(text))
}

// count returns the rows of table.
func (e *testEnv) count(table string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

const callbackBody = `{"execution_id":"0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b","job_id":"nightly-report","state":"succeeded"}`

func TestDuplicateDeliveryWritesOnce(t *testing.T) {
	t.Parallel()
	env := setup(t)
	const id = "0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b"

	status, text := env.deliver(id, callbackBody)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "processed", text)

	status, text = env.deliver(id, callbackBody)
	require.Equal(t, http.StatusOK, status, "a duplicate is answered 2xx so that the sender stops retrying")
	require.Equal(t, "duplicate: already processed", text)

	require.Equal(t, 1, env.count("receiver_execution_outcome"))
	require.Equal(t, 1, env.count("receiver_webhook_message"))
	var state, executionID string
	require.NoError(t, env.pool.QueryRow(context.Background(),
		"SELECT state, execution_id FROM receiver_execution_outcome").Scan(&state, &executionID))
	require.Equal(t, "succeeded", state)
	require.Equal(t, id, executionID)
}

func TestConcurrentDuplicatesWriteOnce(t *testing.T) {
	t.Parallel()
	env := setup(t)
	const deliveries = 8
	statuses := make(chan int, deliveries)
	var wg sync.WaitGroup
	for range deliveries {
		wg.Go(func() {
			status, _ := env.deliver("exec_race", callbackBody)
			statuses <- status
		})
	}
	wg.Wait()
	close(statuses)
	for status := range statuses {
		require.Equal(t, http.StatusOK, status)
	}
	require.Equal(t, 1, env.count("receiver_execution_outcome"))
}

func TestDistinctMessagesEachWrite(t *testing.T) {
	t.Parallel()
	env := setup(t)
	for _, id := range []string{"exec_1", "exec_2", "exec_1", "exec_3", "exec_2"} {
		status, _ := env.deliver(id, callbackBody)
		require.Equal(t, http.StatusOK, status)
	}
	require.Equal(t, 3, env.count("receiver_execution_outcome"))
}

func TestFailedWriteLeavesTheIDFree(t *testing.T) {
	t.Parallel()
	env := setup(t)
	var failed bool
	env.receiver.beforeCommit = func(context.Context) error {
		if failed {
			return nil
		}
		failed = true
		return errors.New("crash before commit")
	}

	status, _ := env.deliver("exec_1", callbackBody)
	require.Equal(t, http.StatusInternalServerError, status, "the sender must retry")
	require.Equal(t, 0, env.count("receiver_webhook_message"), "the claim rolled back with the business write")
	require.Equal(t, 0, env.count("receiver_execution_outcome"))

	status, text := env.deliver("exec_1", callbackBody)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "processed", text, "the retry is processed, not taken for a duplicate")
	require.Equal(t, 1, env.count("receiver_execution_outcome"))
}

func TestUnverifiedRequestsWriteNothing(t *testing.T) {
	t.Parallel()
	env := setup(t)

	req, err := http.NewRequest(http.MethodPost, env.url, strings.NewReader(callbackBody))
	require.NoError(t, err)
	require.NoError(t, webhook.Sign(req.Header, "exec_1", time.Now(), []byte(callbackBody), webhook.NewSecret()))
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)

	status, _ := env.deliver("exec_1", "not json")
	require.Equal(t, http.StatusBadRequest, status)

	require.Equal(t, 0, env.count("receiver_webhook_message"))
	require.Equal(t, 0, env.count("receiver_execution_outcome"))
}

func TestMigrateTwice(t *testing.T) {
	t.Parallel()
	env := setup(t)
	require.NoError(t, env.receiver.Migrate(context.Background()))
}

func TestNewVerifier(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.DiscardHandler)
	v, err := newVerifier(" "+webhook.NewSecret().Text()+"  "+webhook.NewSecret().Text()+"\n", logger)
	require.NoError(t, err)
	require.Len(t, v.Secrets, 2)
	_, err = newVerifier("", logger)
	require.ErrorContains(t, err, "WEBHOOK_SECRETS is not set")
	_, err = newVerifier("whsec_tooshort", logger)
	require.ErrorIs(t, err, webhook.ErrInvalidSecret)
}
