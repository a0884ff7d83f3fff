package cluster

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestCallbackOfKilledReplicaDeliveredByAnother SIGKILLs the replica, also
// River's leader, whose callback delivery a slow receiver holds open,
// while two other replicas run: another delivers it within 60 s (River
// alone left it running for an hour), with the same webhook-id, and one
// delivered attempt is recorded. It runs for about a minute: the rescue
// waits out the attempt's timeout (30 s) and its margins.
func TestCallbackOfKilledReplicaDeliveredByAnother(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about a minute")
	}
	t.Parallel()
	const loopback = "AX_OUTBOUND_ALLOW_LOOPBACK=true"
	// Before the first: two more start while a delivery is held open.
	proctest.ReserveServers(t, 3)
	first := e2ekit.StartServerOn(t, dbtest.NewURL(t), loopback)
	pool, err := pgxpool.New(context.Background(), first.DBURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	victim := fmt.Sprintf("_pid%d_", first.Proc.PID())
	// Alone, the first replica is River's leader.
	require.Eventually(t, func() bool {
		var leader string
		_ = pool.QueryRow(context.Background(), `SELECT leader_id FROM ax.river_leader`).Scan(&leader)
		return strings.Contains(leader, victim)
	}, 30*time.Second, 100*time.Millisecond, "first replica leads")

	type hit struct {
		webhookID string
		at        time.Time
	}
	var (
		mu   sync.Mutex
		hits []hit
	)
	held, release := make(chan struct{}), make(chan struct{})
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		hits = append(hits, hit{r.Header.Get("webhook-id"), time.Now()})
		n := len(hits)
		mu.Unlock()
		if n == 1 { // the first delivery is held until its sender dies
			close(held)
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for handlers
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	t.Cleanup(target.Close)

	job := first.CreateJob(t, map[string]any{"name": "slow-callback", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "http", "url": target.URL}, "callback": map[string]any{"url": receiver.URL + "/hook"}})
	exec := first.Trigger(t, job)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the first delivery never came")
	}
	for range 2 {
		addr := proctest.FreeAddr(t)
		p := proctest.Start(t, proctest.Binary(t, "ax"),
			[]string{"DATABASE_URL=" + first.DBURL, "AX_ADDR=" + addr, loopback}, "serve")
		proctest.WaitHTTP(t, "http://"+addr+"/readyz", 90*time.Second)
		_ = p
	}
	var attemptedBy []string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT attempted_by FROM ax.river_job WHERE kind = 'ax_callback' AND state = 'running' AND args->>'execution_id' = $1`,
		exec).Scan(&attemptedBy))
	require.Contains(t, attemptedBy[len(attemptedBy)-1], victim, "the first replica delivers")

	first.Proc.Signal(syscall.SIGKILL)
	killed := time.Now()
	require.Error(t, first.Proc.Wait(10*time.Second), "killed")

	var state string
	require.Eventually(t, func() bool {
		_ = pool.QueryRow(context.Background(), `SELECT state::text FROM ax.callback WHERE execution_id = $1`, exec).Scan(&state)
		return state == "delivered"
	}, 60*time.Second, 200*time.Millisecond, "delivered within 60 s of the kill (state %s)", state)
	t.Logf("delivered %s after the kill", time.Since(killed).Round(time.Second))

	// No storm: nothing is left to deliver it again. Every River job of
	// this callback is completed once River has recorded it (a job still
	// running would be a delivery in flight; one scheduled or retryable,
	// a delivery to come).
	var unfinished int
	require.Eventually(t, func() bool {
		err := pool.QueryRow(context.Background(), `SELECT count(*) FROM ax.river_job
			WHERE kind = 'ax_callback' AND args->>'execution_id' = $1 AND state <> 'completed'`, exec).Scan(&unfinished)
		return err == nil && unfinished == 0
	}, 10*time.Second, 20*time.Millisecond, "every delivery job of the callback completes (%d not)", unfinished)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, hits, 2, "the held delivery and its redelivery")
	require.NotEmpty(t, hits[0].webhookID)
	require.Equal(t, hits[0].webhookID, hits[1].webhookID, "same webhook-id")
	var delivered, attempts int
	require.NoError(t, pool.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE status_code BETWEEN 200 AND 299), count(*)
		FROM ax.callback_attempt WHERE execution_id = $1`, exec).Scan(&delivered, &attempts))
	require.Equal(t, 1, delivered, "one success recorded")
	require.Equal(t, 1, attempts, "the killed attempt left no record")
}
