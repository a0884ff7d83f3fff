package db_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestAgentTaskWritesLockInIDOrder: the statements that write several
// tasks of one agent (heartbeat, results, release, a 202's hand-over, a
// cancel of their runs) lock them in id order, whatever the order of
// their input. Each locking in its own input's order, a heartbeat and a
// completion of the same two tasks deadlocked: Postgres broke it after
// deadlock_timeout (1 s), failing one of them (seen in
// BenchmarkDelayedRuns' server log).
//
// Shown by holding the higher id's row: a statement given [higher, lower]
// that waits for it must hold the lower one already.
func TestAgentTaskWritesLockInIDOrder(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	statements := map[string]func(tx pgx.Tx, agent uuid.UUID, refs []axtype.TaskRef) error{
		"heartbeat": func(tx pgx.Tx, agent uuid.UUID, refs []axtype.TaskRef) error {
			_, err := db.TaskRenew(ctx, tx, agent, refs, time.Minute, nil)
			return err
		},
		"results": func(tx pgx.Tx, agent uuid.UUID, refs []axtype.TaskRef) error {
			results := make([]axtype.TaskResult, len(refs))
			agents := make([]uuid.UUID, len(refs))
			for i, r := range refs {
				results[i], agents[i] = axtype.TaskResult{TaskRef: r, State: axtype.TaskSucceeded}, agent
			}
			_, err := db.TaskCompleteByAgents(ctx, tx, agents, results, nil)
			return err
		},
		"release": func(tx pgx.Tx, agent uuid.UUID, refs []axtype.TaskRef) error {
			_, err := db.TaskRelease(ctx, tx, agent, refs)
			return err
		},
		"202 hand-over": func(tx pgx.Tx, agent uuid.UUID, refs []axtype.TaskRef) error {
			_, err := db.TaskAwaitTarget(ctx, tx, agent, refs, time.Minute)
			return err
		},
		// A cancel of their runs flags both tasks for their agent.
		"cancel": func(tx pgx.Tx, _ uuid.UUID, refs []axtype.TaskRef) error {
			var runs []uuid.UUID
			for _, r := range refs {
				var run uuid.UUID
				if err := tx.QueryRow(ctx, "SELECT execution_id FROM ax.task WHERE id = $1", r.ID).Scan(&run); err != nil {
					return err
				}
				runs = append(runs, run)
			}
			_, err := db.ExecutionCancel(ctx, tx, runs, nil, "test")
			return err
		},
	}
	for name, statement := range statements {
		agent, lower, higher := runningPair(t, pool)
		blocker, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = blocker.Exec(ctx, "SELECT 1 FROM ax.task WHERE id = $1 FOR UPDATE", higher.ID)
		require.NoError(t, err)

		writer, err := pool.Begin(ctx)
		require.NoError(t, err)
		var writerPID int32
		require.NoError(t, writer.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&writerPID))
		var statementErr error
		finished := make(chan struct{})
		go func() {
			defer close(finished)
			statementErr = statement(writer, agent, []axtype.TaskRef{higher, lower})
		}()
		t.Cleanup(func() { // also when a check below fails: free the writer, then end it
			_ = blocker.Rollback(ctx)
			select {
			case <-finished:
			case <-time.After(10 * time.Second):
			}
			_ = writer.Rollback(ctx)
		})
		waitForLock(t, pool, writerPID, name)

		_, err = pool.Exec(ctx, "SELECT 1 FROM ax.task WHERE id = $1 FOR UPDATE NOWAIT", lower.ID)
		var pgErr *pgconn.PgError
		require.True(t, errors.As(err, &pgErr) && pgErr.Code == "55P03",
			"%s: waiting for the higher id, it holds the lower one (locking it: %v)", name, err)

		require.NoError(t, blocker.Rollback(ctx))
		<-finished
		require.NoError(t, statementErr, name)
		require.NoError(t, writer.Rollback(ctx))
	}
}

// runningPair inserts an agent and two running HTTP tasks leased to it,
// each of a run of its own, the higher ids first (so that neither the
// input's order nor the tables' is id order), and returns the agent and
// the tasks' references.
func runningPair(t *testing.T, pool *pgxpool.Pool) (agent uuid.UUID, lower, higher axtype.TaskRef) {
	t.Helper()
	ctx := context.Background()
	agent, jobID := httpAgentAndJob(t, pool, "pair", false)
	descending := func() []uuid.UUID {
		ids := []uuid.UUID{uuid.New(), uuid.New()}
		if bytes.Compare(ids[0][:], ids[1][:]) < 0 {
			ids[0], ids[1] = ids[1], ids[0]
		}
		return ids
	}
	ids, runs := descending(), descending()
	refs := make([]axtype.TaskRef, 2)
	for i, id := range ids { // the higher ids first
		refs[i] = axtype.TaskRef{ID: id, Token: uuid.New()}
		_, err := pool.Exec(ctx, `
			WITH e AS (
			    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority, state, started_at)
			    VALUES ($5, $1, 'manual', now(), 1, 0, 'running', now()) RETURNING id, job_id
			)
			INSERT INTO ax.task (id, execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
			                     state, agent_id, lease_token, lease_expires_at, leased_at, started_at)
			SELECT $2, id, job_id, 0, 1, 0, 1, 60, 'running', $3, $4, now() + interval '1 minute', now(), now() FROM e`,
			jobID, id, agent, refs[i].Token, runs[i])
		require.NoError(t, err)
	}
	return agent, refs[1], refs[0]
}

// httpAgentAndJob inserts an active agent of HTTP tasks (with its API key)
// and a manual HTTP job, agentless or not, both named after name.
func httpAgentAndJob(t *testing.T, pool *pgxpool.Pool, name string, agentless bool) (agent, job uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	var keyID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ($1, sha256(gen_random_uuid()::text::bytea), 'ax_test', '{agent}') RETURNING id`, name).Scan(&keyID))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state)
		VALUES (gen_random_uuid(), $1, 10, $2, '{http}', 'active') RETURNING id`, name, keyID).Scan(&agent))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		VALUES ($1, 'manual', 'http', '{"kind": "http", "url": "https://example.test/"}', $2) RETURNING id`,
		name+"-"+uuid.NewString()[:8], agentless).Scan(&job))
	return agent, job
}
