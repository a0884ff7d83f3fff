package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestPruneGoneKeepsWhatAKeptRunOrALiveTaskNames: the cleanup's prune
// deletes agents (with their tokens), notices and the backfill and re-run
// links of runs once they are past the history horizon (by default 30
// days of failed-run retention and two one-day partition widths: 32
// days), and nothing a live task, a run still kept, a pending notice or
// a new registration's drain needs. A job keeping its history longer
// moves the horizon back for all of them.
func TestPruneGoneKeepsWhatAKeptRunOrALiveTaskNames(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var registrar, jobID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('registrar', sha256('registrar'), 'ax_reg', '{agent}') RETURNING id`).Scan(&registrar))
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless,
		history_retention_seconds)
		VALUES ('nightly', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false, 60 * 86400)
		RETURNING id`).Scan(&jobID))

	// Agents, each with its own minted token, offline (or not) since
	// daysAgo; drained: an operator's drain its identity passes on.
	agent := func(name, state string, daysAgo int, drained bool) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `
			WITH k AS (
			    INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes, minted_by)
			    VALUES ('agent:' || $1, sha256(gen_random_uuid()::text::bytea), 'ax_tok', '{agent}', $2) RETURNING id
			)
			INSERT INTO ax.agent (id, name, capacity, api_key_id, registered_by, executors, state,
			                      registered_at, last_heartbeat_at, drained_at)
			SELECT gen_random_uuid(), $1, 2, k.id, $2, '{shell}', $3::ax.agent_state,
			       now() - make_interval(days => $4 + 1), now() - make_interval(days => $4),
			       CASE WHEN $5 THEN now() - make_interval(days => $4 + 1) END
			FROM k RETURNING id`, name, registrar, state, daysAgo, drained).Scan(&id))
		return id
	}
	gone := agent("gone", "offline", 40, false)
	leased := agent("leased", "offline", 40, false)
	pinned := agent("pinned", "offline", 40, false)
	recent := agent("recent", "offline", 10, false)
	silent := agent("silent", "active", 40, false)
	drainedOld := agent("drained", "offline", 50, true)
	drainedLast := agent("drained", "offline", 40, true)
	twiceOld := agent("twice", "offline", 45, false)
	twiceLast := agent("twice", "offline", 40, false)

	// Runs fired daysAgo (by id), with their live task on an agent when
	// given; the first a run still live, the second one kept in history.
	runAt := func(daysAgo int) uuid.UUID {
		t.Helper()
		var id uuid.UUID
		require.NoError(t, pool.QueryRow(ctx, `SELECT ax.uuid_v7_floor(now() - make_interval(days => $1)
			+ random() * interval '1 hour')`, daysAgo).Scan(&id))
		return id
	}
	liveRun, keptRun, goneRun, goneOriginal, recentGoneRun := runAt(40), runAt(40), runAt(40), runAt(41), runAt(10)
	rerunOfKept := runAt(39)
	exec := func(query string, args ...any) {
		t.Helper()
		_, err := pool.Exec(ctx, query, args...)
		require.NoError(t, err)
	}
	exec(`INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority, finished_at, state)
		VALUES ($1, $3, 'manual', now(), 1, 0, NULL, 'running'),
		       ($2, $3, 'manual', now(), 1, 0, now(), 'succeeded')`, liveRun, keptRun, jobID)
	exec(`INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     state, agent_id, lease_token, lease_expires_at, leased_at)
		VALUES ($1, $2, 0, 1, 0, 1, 60, 'leased', $3, gen_random_uuid(), now() + interval '1 minute', now())`,
		liveRun, jobID, leased)
	exec(`INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     state, finished_at)
		VALUES ($1, $2, 0, 1, 0, 1, 60, 'succeeded', now())`, keptRun, jobID)
	var moved int
	require.NoError(t, pool.QueryRow(ctx, `SELECT ax.history_move(ARRAY[$1::uuid], now())`, keptRun).Scan(&moved))
	require.Equal(t, 1, moved, "the finished run is in history")
	pinnedRun := uuid.Must(uuid.NewV7())
	exec(`INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		VALUES ($1, $2, 'manual', now(), 1, 0)`, pinnedRun, jobID)
	exec(`INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds,
		                     preferred_agent_id, pinned)
		VALUES ($1, $2, 0, 1, 0, 1, 60, $3, true)`, pinnedRun, jobID, pinned)

	var backfillID uuid.UUID
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.backfill (job_id, range_from, range_to, next_tick, ticks_total)
		VALUES ($1, now() - interval '41 days', now(), now(), 5) RETURNING id`, jobID).Scan(&backfillID))
	exec(`INSERT INTO ax.backfill_run (execution_id, backfill_id, tick)
		SELECT u.id, $1, now() - u.n * interval '1 hour' FROM unnest($2::uuid[]) WITH ORDINALITY AS u(id, n)`,
		backfillID, []uuid.UUID{liveRun, keptRun, goneRun, recentGoneRun})
	exec(`INSERT INTO ax.execution_rerun (execution_id, rerun_of, request_key, shards)
		VALUES ($1, $2, 'gone', 'all'), ($3, $4, 'original kept', 'all'), ($5, $2, 'recent', 'all')`,
		goneRun, goneOriginal, rerunOfKept, keptRun, recentGoneRun)

	var targetID int64
	require.NoError(t, pool.QueryRow(ctx, `INSERT INTO ax.notice_target (job_id, position, kind, url, events)
		VALUES ($1, 0, 'webhook', 'http://127.0.0.1:1/hook', '{failed}') RETURNING id`, jobID).Scan(&targetID))
	exec(`INSERT INTO ax.notice (job_id, target_id, event, url, state, created_at)
		VALUES ($1, $2, 'failed', 'http://127.0.0.1:1/hook', 'delivered', now() - interval '40 days'),
		       ($1, $2, 'failed', 'http://127.0.0.1:1/hook', 'rate_limited', now() - interval '40 days'),
		       ($1, $2, 'failed', 'http://127.0.0.1:1/hook', 'pending', now() - interval '40 days'),
		       ($1, $2, 'failed', 'http://127.0.0.1:1/hook', 'delivered', now() - interval '10 days')`, jobID, targetID)

	// The job keeps its history 60 days: the horizon is 62 days back,
	// and nothing is past it.
	pruned, err := db.PruneGone(ctx, pool, db.PruneBatch)
	require.NoError(t, err)
	require.Equal(t, db.Pruned{}, pruned, "nothing is older than the longest retention")

	exec(`UPDATE ax.job SET history_retention_seconds = NULL WHERE id = $1`, jobID)
	tokens := tokensOf(t, pool, gone, drainedOld, twiceOld, twiceLast)

	// One row a table a call: the batch bounds each statement.
	pruned, err = db.PruneGone(ctx, pool, 1)
	require.NoError(t, err)
	require.Equal(t, db.Pruned{Agents: 1, Notices: 1, BackfillRuns: 1, Reruns: 1}, pruned)
	pruned, err = db.PruneGone(ctx, pool, db.PruneBatch)
	require.NoError(t, err)
	require.Equal(t, db.Pruned{Agents: 2, Notices: 1}, pruned)

	require.ElementsMatch(t, []uuid.UUID{leased, pinned, recent, silent, drainedLast, twiceLast},
		ids(t, pool, `SELECT id FROM ax.agent`),
		"kept: a leased task's, a pinned task's, the recent, the one not offline, a drained identity's last, "+
			"and an identity's last while an older row of it was there")
	// The last of an identity goes once the older rows have.
	pruned, err = db.PruneGone(ctx, pool, db.PruneBatch)
	require.NoError(t, err)
	require.Equal(t, db.Pruned{Agents: 1}, pruned)
	require.NotContains(t, ids(t, pool, `SELECT id FROM ax.agent`), twiceLast)

	require.Empty(t, ids(t, pool, `SELECT id FROM ax.api_key WHERE id = ANY($1)`, tokens),
		"the pruned agents' tokens are deleted with them")
	require.Contains(t, ids(t, pool, `SELECT id FROM ax.api_key`), registrar, "the key they registered with stays")
	require.ElementsMatch(t, []uuid.UUID{liveRun, keptRun, recentGoneRun},
		ids(t, pool, `SELECT execution_id FROM ax.backfill_run`), "the link of the run gone 40 days ago is deleted")
	require.ElementsMatch(t, []uuid.UUID{rerunOfKept, recentGoneRun},
		ids(t, pool, `SELECT execution_id FROM ax.execution_rerun`),
		"the re-run of a run still in history, and a recent one, stay")
	var states []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(state::text || ':' || (created_at > now() - interval '20 days')::text
		ORDER BY id) FROM ax.notice`).Scan(&states))
	require.Equal(t, []string{"pending:false", "delivered:true"}, states, "an old pending notice and a recent one stay")

	pruned, err = db.PruneGone(ctx, pool, db.PruneBatch)
	require.NoError(t, err)
	require.Equal(t, db.Pruned{}, pruned, "nothing more")
}

func tokensOf(t *testing.T, pool *pgxpool.Pool, agents ...uuid.UUID) []uuid.UUID {
	t.Helper()
	return ids(t, pool, `SELECT api_key_id FROM ax.agent WHERE id = ANY($1)`, agents)
}

func ids(t *testing.T, pool *pgxpool.Pool, query string, args ...any) []uuid.UUID {
	t.Helper()
	rows, err := pool.Query(context.Background(), query, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}
