package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
)

// budgetAnswer is what one request of TestBodyMemoryBudgetOnServe got.
type budgetAnswer struct {
	status     int
	retryAfter string
	problem    map[string]any
	err        error
}

// send posts body to s with the admin key, from r (a pipe, to hold it
// half sent) when given.
func send(s *e2ekit.Server, path string, body string, r io.Reader) budgetAnswer {
	if r == nil {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest("POST", s.URL+path, r)
	if err != nil {
		return budgetAnswer{err: err}
	}
	req.ContentLength = int64(len(body))
	req.Header.Set("Authorization", "Bearer "+s.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return budgetAnswer{err: err}
	}
	defer resp.Body.Close()
	out := budgetAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	_ = json.NewDecoder(resp.Body).Decode(&out.problem)
	return out
}

// An ax serve process given a body memory budget of 16 MiB
// (AX_BODY_MEMORY_BUDGET) holds two 8 MiB batches of 1,000 runs at once,
// not more: while two arrive slowly, four more sent at once are refused
// with 503, Retry-After and a problem, before their bodies are read, and
// store nothing; the two are served, and then the others fit.
func TestBodyMemoryBudgetOnServe(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_BODY_MEMORY_BUDGET=16777216")
	id := s.CreateJob(t, map[string]any{"name": "budget", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	var b strings.Builder
	b.WriteString(`{"runs":[`)
	for i := range 1000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"job_id":%q,"delay_seconds":3600,"params":{"i":%d,"pad":%q}}`, id, i, strings.Repeat("p", 8<<10))
	}
	b.WriteString(`]}`)
	batch := b.String()
	require.Greater(t, len(batch), 8<<20-200<<10)

	// Two batches arrive slowly: half now, the rest when told.
	var held sync.WaitGroup
	answers := make([]budgetAnswer, 2)
	writers := make([]*io.PipeWriter, 2)
	for i := range writers {
		pr, pw := io.Pipe()
		writers[i] = pw
		t.Cleanup(func() { _ = pw.CloseWithError(io.ErrUnexpectedEOF) })
		held.Go(func() { answers[i] = send(s, "/v1/runs/batch", batch, pr) })
		_, err := pw.Write([]byte(batch[:len(batch)/2]))
		require.NoError(t, err)
	}
	// Once both are counted, 300 KiB more does not fit: a job body that
	// size (refused with 422 when it fits, changing nothing) tells when.
	probe := `{"name":"probe"}` + strings.Repeat(" ", 300<<10)
	deadline := time.Now().Add(30 * time.Second)
	for a := send(s, "/v1/jobs", probe, nil); a.status != http.StatusServiceUnavailable; a = send(s, "/v1/jobs", probe, nil) {
		require.NoError(t, a.err)
		require.Equal(t, http.StatusUnprocessableEntity, a.status)
		require.True(t, time.Now().Before(deadline), "the held batches are never counted")
		time.Sleep(20 * time.Millisecond)
	}

	// Four more at once: all refused, at once.
	var more sync.WaitGroup
	refused := make([]budgetAnswer, 4)
	began := time.Now()
	for i := range refused {
		more.Go(func() { refused[i] = send(s, "/v1/runs/batch", batch, nil) })
	}
	more.Wait()
	for _, a := range refused {
		require.NoError(t, a.err)
		require.Equal(t, http.StatusServiceUnavailable, a.status, a.problem)
		require.Equal(t, "2", a.retryAfter)
		require.Contains(t, a.problem["detail"], "busy")
	}
	t.Logf("four batches refused in %s", time.Since(began).Round(time.Millisecond))
	require.Zero(t, delayedRuns(t, s), "nothing of a refused batch is stored")

	// The held two are served; then two more fit, one after the other.
	for _, pw := range writers {
		_, err := pw.Write([]byte(batch[len(batch)/2:]))
		require.NoError(t, err)
		require.NoError(t, pw.Close())
	}
	held.Wait()
	for _, a := range answers {
		require.NoError(t, a.err)
		require.Equal(t, http.StatusAccepted, a.status, a.problem)
	}
	for range 2 {
		a := send(s, "/v1/runs/batch", batch, nil)
		require.Equal(t, http.StatusAccepted, a.status, a.problem)
	}
	require.Equal(t, 4000, delayedRuns(t, s))
}

// delayedRuns counts the runs waiting in s's database.
func delayedRuns(t *testing.T, s *e2ekit.Server) int {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), s.DBURL)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var n int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM ax.delayed_run").Scan(&n))
	return n
}
