package e2ekit

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// OpenPool connects to the test's database, as psql would, to check rows.
func OpenPool(t testing.TB, dbURL string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// TaskRow is one ax.task row, the columns a result changes.
type TaskRow struct {
	ID, State, AgentID, LeaseToken, Result, Error string
	Attempt                                       int
	UpdatedAt                                     time.Time
}

// TasksOf returns the tasks of an execution by shard.
func TasksOf(t testing.TB, pool *pgxpool.Pool, execID string) []TaskRow {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT id::text, state::text, coalesce(agent_id::text, ''), coalesce(lease_token::text, ''),
		       coalesce(result::text, ''), coalesce(error, ''), attempt, updated_at
		FROM ax.all_tasks WHERE execution_id = $1 ORDER BY shard_index`, execID)
	require.NoError(t, err)
	defer rows.Close()
	var out []TaskRow
	for rows.Next() {
		var r TaskRow
		require.NoError(t, rows.Scan(&r.ID, &r.State, &r.AgentID, &r.LeaseToken, &r.Result, &r.Error, &r.Attempt, &r.UpdatedAt))
		out = append(out, r)
	}
	require.NoError(t, rows.Err())
	return out
}

// StateEvent is one state change of a task, from ax.all_task_events.
type StateEvent struct {
	State, AgentID, Message string
	Attempt                 int
	At                      time.Time
}

// StateEvents returns a task's state changes in order.
func StateEvents(t testing.TB, pool *pgxpool.Pool, taskID string) []StateEvent {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
		SELECT state::text, coalesce(agent_id::text, ''), message, attempt, at
		FROM ax.all_task_events WHERE task_id = $1 AND kind = 'state' ORDER BY id`, taskID)
	require.NoError(t, err)
	defer rows.Close()
	var out []StateEvent
	for rows.Next() {
		var e StateEvent
		require.NoError(t, rows.Scan(&e.State, &e.AgentID, &e.Message, &e.Attempt, &e.At))
		out = append(out, e)
	}
	require.NoError(t, rows.Err())
	return out
}
