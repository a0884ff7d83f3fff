package db_test

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestHotStatementsJoinInLinearTimeAsGenericPlans: leasing 300 tasks and
// completing them, with generic plans (as db.WithBatchTxV runs small
// batches, and as Postgres may choose for large ones), joins the tasks
// with their runs and with the results without comparing every row with
// every other. The plans are auto_explain's, sent to the test's connection
// as notices. Before migration 00034, TaskComplete's generic plan here
// joined results and tasks in a nested loop: 89,700 rows removed by a
// join filter for 300 tasks. (TaskLeaseTake's did so in
// BenchmarkEndToEndReplicas, not on these fresh tables.)
func TestHotStatementsJoinInLinearTimeAsGenericPlans(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 300
	cfg, err := pgx.ParseConfig(dbtest.NewURL(t))
	require.NoError(t, err)
	var mu sync.Mutex
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	pgxuuid.Register(conn.TypeMap())

	var agentID uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `
		WITH k AS (
		    INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		    VALUES ('plans', sha256('plans'), 'ax_plan', '{agent}') RETURNING id
		)
		INSERT INTO ax.agent (id, name, capacity, api_key_id, executors)
		SELECT gen_random_uuid(), 'plans-agent', 10000, id, '{shell}' FROM k RETURNING id`).Scan(&agentID))
	_, err = conn.Exec(ctx, `
		WITH j AS (
		    INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		    VALUES ('plans', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false) RETURNING id
		), e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		    SELECT gen_random_uuid(), j.id, 'manual', now(), 1, 0 FROM j, generate_series(1, $1) RETURNING id, job_id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds)
		SELECT id, job_id, 0, 1, 0, 1, 60 FROM e`, n)
	require.NoError(t, err)

	tx, err := conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // the test's changes are rolled back
	for _, set := range []string{"LOAD 'auto_explain'", "SET LOCAL auto_explain.log_min_duration = 0",
		"SET LOCAL auto_explain.log_analyze = on", "SET LOCAL auto_explain.log_timing = off",
		"SET LOCAL client_min_messages = log", "SET LOCAL plan_cache_mode = force_generic_plan"} {
		_, err := tx.Exec(ctx, set)
		require.NoError(t, err, set)
	}
	leased, err := db.TaskLease(ctx, tx, &db.TaskLeaseParams{AgentID: agentID, AgentExecutors: []string{"shell"},
		Max: n, Lease: time.Minute, StealAfter: time.Second, StarveAfter: time.Hour,
		Grants: map[string]int{}})
	require.NoError(t, err)
	require.Len(t, leased, n)
	results := make([]db.TaskResult, n)
	for i, l := range leased {
		results[i] = db.TaskResult{TaskRef: db.TaskRef{ID: l.ID, Token: l.LeaseToken}, State: db.TaskSucceeded}
	}
	done, err := db.TaskCompleteByAgent(ctx, tx, agentID, results, nil)
	require.NoError(t, err)
	require.Len(t, done, n)

	mu.Lock()
	defer mu.Unlock()
	removed := regexp.MustCompile(`Rows Removed by Join Filter: (\d+)`)
	for _, name := range []string{"TaskLeaseTake", "TaskComplete"} {
		var plan string
		for _, p := range plans {
			if strings.Contains(p, "-- name: "+name+" ") {
				plan = p
			}
		}
		require.NotEmpty(t, plan, "auto_explain's plan of %s", name)
		require.Contains(t, plan, "$1", "a generic plan: the parameters are not folded in")
		for _, m := range removed.FindAllStringSubmatch(plan, -1) {
			rows, _ := strconv.Atoi(m[1])
			require.LessOrEqual(t, rows, n, "%s compares rows pairwise:\n%s", name, plan)
		}
	}
}

// TestSmallBatchPlansStayIndexedAsTablesGrow: a small batch's generic
// plans are made once per connection, and nothing remakes them while a
// table only grows (no VACUUM or ANALYZE runs for inserts). Made on an
// empty queue, they must not scan the tasks: leasing one task and
// completing it with 20,000 other tasks pending reads them by key.
func TestSmallBatchPlansStayIndexedAsTablesGrow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dbtest.NewURL(t))
	require.NoError(t, err)
	var mu sync.Mutex
	var plans []string
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		defer mu.Unlock()
		plans = append(plans, n.Message)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	pgxuuid.Register(conn.TypeMap())

	var agentID, jobID uuid.UUID
	require.NoError(t, conn.QueryRow(ctx, `
		WITH k AS (
		    INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		    VALUES ('grow', sha256('grow'), 'ax_grow', '{agent}') RETURNING id
		), a AS (
		    INSERT INTO ax.agent (id, name, capacity, api_key_id, executors)
		    SELECT gen_random_uuid(), 'grow-agent', 10000, id, '{shell}' FROM k RETURNING id
		)
		INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		SELECT 'grow', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false FROM a
		RETURNING (SELECT id FROM a), id`).Scan(&agentID, &jobID))
	addTasks := func(n int) {
		t.Helper()
		_, err := conn.Exec(ctx, `
			WITH e AS (
			    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
			    SELECT gen_random_uuid(), $1, 'manual', now(), 1, 0 FROM generate_series(1, $2) RETURNING id, job_id
			)
			INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds)
			SELECT id, job_id, 0, 1, 0, 1, 60 FROM e`, jobID, n)
		require.NoError(t, err)
	}
	leaseAndComplete := func() {
		t.Helper()
		_, err := db.WithBatchTxV(ctx, conn, 1, func(tx pgx.Tx) (struct{}, error) {
			leased, err := db.TaskLease(ctx, tx, &db.TaskLeaseParams{AgentID: agentID, AgentExecutors: []string{"shell"},
				Max: 1, Lease: time.Minute, StealAfter: time.Second, StarveAfter: time.Hour, Grants: map[string]int{}})
			if err != nil || len(leased) != 1 {
				return struct{}{}, fmt.Errorf("leased %d: %w", len(leased), err)
			}
			_, err = db.TaskCompleteByAgent(ctx, tx, agentID, []db.TaskResult{{
				TaskRef: db.TaskRef{ID: leased[0].ID, Token: leased[0].LeaseToken}, State: db.TaskSucceeded}}, nil)
			return struct{}{}, err
		})
		require.NoError(t, err)
	}
	// The plans are made on a queue of one task at a time.
	for range 3 {
		addTasks(1)
		leaseAndComplete()
	}
	addTasks(20_000)
	for _, set := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on", "SET client_min_messages = log"} {
		_, err := conn.Exec(ctx, set)
		require.NoError(t, err, set)
	}
	leaseAndComplete()
	_, err = conn.Exec(ctx, "SET client_min_messages = notice")
	require.NoError(t, err)

	mu.Lock()
	defer mu.Unlock()
	var seen int
	for _, p := range plans {
		if !strings.Contains(p, "ax.task") {
			continue
		}
		seen++
		require.NotContains(t, p, "Seq Scan on task ", "a statement scans every task:\n%s", p)
	}
	require.Positive(t, seen, "auto_explain's plans of the lease and the completion")
}
