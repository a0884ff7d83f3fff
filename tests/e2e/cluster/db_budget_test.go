package cluster

import (
	"context"
	"crypto/rand"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestReplicaWaitsForAConnectionSlot starts `ax serve` against a server
// with no slot left for it (its role's CONNECTION LIMIT is taken by
// other sessions, the "too many connections" a full server gives during
// a deploy surge): the replica waits, logs why, and does not exit; once
// the sessions end it connects, migrates and becomes ready.
func TestReplicaWaitsForAConnectionSlot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := dbtest.NewURL(t)
	// The replica's pools below: 5 + 1. (With 3 + 1 the replica started but
	// never became ready: the run logger's leader lock and the notifier
	// each hold an engine connection for good, so what was left could not
	// serve /readyz beside the loops.)
	const slots = 6
	roleURL := limitedRole(t, dbURL, slots)

	var held []*pgx.Conn
	for range slots {
		conn, err := pgx.Connect(ctx, roleURL)
		require.NoError(t, err)
		held = append(held, conn)
	}
	t.Cleanup(func() {
		for _, c := range held {
			c.Close(context.Background())
		}
	})

	key := "ax_e2e_bootstrap_admin_key_0123456789"
	proc := proctest.Start(t, proctest.Binary(t, "ax"), []string{"DATABASE_URL=" + roleURL, "AX_ADMIN_KEY=" + key,
		"AX_ADDR=127.0.0.1:0", "AX_DB_MAX_CONNS=5", "AX_DB_REQUEST_CONNS=1"}, "serve")
	require.Eventually(t, func() bool {
		return strings.Contains(proc.Output(), "database refused a connection; waiting and retrying")
	}, 30*time.Second, 50*time.Millisecond, "the replica says it waits")
	require.Contains(t, proc.Output(), "too many connections", "and why")
	require.Never(t, func() bool { return !proc.Running() }, 700*time.Millisecond, 50*time.Millisecond,
		"a full server is no reason to exit")

	for _, c := range held {
		require.NoError(t, c.Close(ctx))
	}
	held = nil
	u := "http://" + proctest.WaitServing(t, proc, 60*time.Second)
	proctest.WaitHTTP(t, u+"/readyz", 30*time.Second)
	require.Contains(t, proc.Output(), "database connection made after waiting")
	proc.Signal(syscall.SIGTERM)
	require.NoError(t, proc.Wait(30*time.Second))
}

// limitedRole makes a login role that may hold at most limit connections
// at once and has the privileges of dbURL's role (a member of it, not a
// superuser: superusers pass connection limits), dropped when the test
// ends; it returns dbURL logged in as it.
func limitedRole(t *testing.T, dbURL string, limit int) string {
	t.Helper()
	ctx := context.Background()
	admin := e2ekit.OpenPool(t, dbURL)
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	role := "ax_budget_" + strings.ToLower(rand.Text()[:10])
	_, err = admin.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN NOSUPERUSER CONNECTION LIMIT "+
		strconv.Itoa(limit)+" IN ROLE "+pgx.Identifier{u.User.Username()}.Sanitize())
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+pgx.Identifier{role}.Sanitize())
	})
	u.User = url.User(role)
	return u.String()
}
