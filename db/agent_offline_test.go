package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestHeartbeatWaitingOnOfflineKeepsItOffline: an agent's heartbeat whose
// statement began before the agent was marked offline waits on the row
// and runs after that commits. Its token (minted at registration) was
// revoked in the same transaction, but the heartbeat's snapshot predates
// it, and Postgres re-reads only the row being updated: it saw the
// token unrevoked and made the agent active again (an e2e test caught it
// under -race). It stays offline: a minted token is always revoked with
// its agent going offline.
func TestHeartbeatWaitingOnOfflineKeepsItOffline(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	var registrar, token, agentID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('registrar', sha256('registrar'), 'ax_reg', '{agent}') RETURNING id`).Scan(&registrar))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes, minted_by)
		VALUES ('token', sha256('token'), 'ax_tok', '{agent}', $1) RETURNING id`, registrar).Scan(&token))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state)
		VALUES (gen_random_uuid(), 'phoenix', 2, $1, '{shell}', 'active') RETURNING id`, token).Scan(&agentID))

	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `UPDATE ax.agent SET state = 'offline' WHERE id = $1`, agentID)
	require.NoError(t, err)

	type beat struct {
		state string
		err   error
	}
	done := make(chan beat, 1)
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	pid := conn.Conn().PgConn().PID()
	go func() {
		st, err := db.AgentHeartbeat(ctx, conn, agentID, &axtype.AgentLoad{Running: 0}, nil)
		done <- beat{st, err}
	}()
	waitOnLock(t, pool, pid, "the heartbeat waits on the agent's row")
	require.NoError(t, tx.Commit(ctx))

	got := <-done
	require.NoError(t, got.err)
	require.Equal(t, "offline", got.state, "the heartbeat returns the state it left")
	var state string
	require.NoError(t, pool.QueryRow(ctx, `SELECT state::text FROM ax.agent WHERE id = $1`, agentID).Scan(&state))
	require.Equal(t, "offline", state)
}
