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

	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/tests/dbtest"
)

// planEnv is a connection to a fresh database that keeps the notices it
// gets (auto_explain's plans, once explainPlans is called), with an agent
// that runs shell tasks and a job of its.
type planEnv struct {
	t       *testing.T
	conn    *pgx.Conn
	agentID uuid.UUID
	jobID   uuid.UUID

	mu      sync.Mutex
	notices []string
}

func newPlanEnv(t *testing.T) *planEnv {
	t.Helper()
	ctx := context.Background()
	e := &planEnv{t: t}
	cfg, err := pgx.ParseConfig(dbtest.NewURL(t))
	require.NoError(t, err)
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.notices = append(e.notices, n.Message)
	}
	e.conn, err = pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { e.conn.Close(context.Background()) })
	pgxuuid.Register(e.conn.TypeMap())
	require.NoError(t, e.conn.QueryRow(ctx, `
		WITH k AS (
		    INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		    VALUES ('plans', sha256('plans'), 'ax_plan', '{agent}') RETURNING id
		), a AS (
		    INSERT INTO ax.agent (id, name, capacity, api_key_id, executors)
		    SELECT gen_random_uuid(), 'plans-agent', 10000, id, '{shell}' FROM k RETURNING id
		)
		INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		SELECT 'plans', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false FROM a
		RETURNING (SELECT id FROM a), id`).Scan(&e.agentID, &e.jobID))
	return e
}

// addTasks adds n runs of the job, of one pending task each.
func (e *planEnv) addTasks(n int) {
	e.t.Helper()
	_, err := e.conn.Exec(context.Background(), `
		WITH e AS (
		    INSERT INTO ax.execution (id, job_id, cause, scheduled_for, shard_count, priority)
		    SELECT gen_random_uuid(), $1, 'manual', now(), 1, 0 FROM generate_series(1, $2) RETURNING id, job_id
		)
		INSERT INTO ax.task (execution_id, job_id, shard_index, shard_total, priority, max_attempts, timeout_seconds)
		SELECT id, job_id, 0, 1, 0, 1, 60 FROM e`, e.jobID, n)
	require.NoError(e.t, err)
}

// explainPlans makes auto_explain send the plan of every statement e runs
// from now on (with x: a transaction, until it ends) as a notice.
func (e *planEnv) explainPlans(x db.Executor) {
	e.t.Helper()
	for _, set := range []string{"LOAD 'auto_explain'", "SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_analyze = on", "SET auto_explain.log_timing = off",
		"SET auto_explain.log_nested_statements = on", "SET client_min_messages = log"} {
		_, err := x.Exec(context.Background(), set)
		require.NoError(e.t, err, set)
	}
}

// plans returns the notices received so far.
func (e *planEnv) plans() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.notices...)
}

// leaseAndComplete leases up to n tasks for the agent in tx and reports
// them succeeded.
func (e *planEnv) leaseAndComplete(tx pgx.Tx, n int) error {
	ctx := context.Background()
	leased, err := dispatch.Lease(ctx, tx, &dispatch.LeaseParams{AgentID: e.agentID, AgentExecutors: []string{"shell"},
		Max: n, Lease: time.Minute, StealAfter: time.Second, StarveAfter: time.Hour, Grants: map[string]int{}})
	if err != nil || len(leased) != n {
		return fmt.Errorf("leased %d of %d: %w", len(leased), n, err)
	}
	results := make([]axtype.TaskResult, n)
	for i, l := range leased {
		results[i] = axtype.TaskResult{TaskRef: axtype.TaskRef{ID: l.ID, Token: l.LeaseToken}, State: axtype.TaskSucceeded}
	}
	done, err := db.TaskCompleteByAgent(ctx, tx, e.agentID, results, nil)
	if err == nil && len(done) != n {
		err = fmt.Errorf("completed %d of %d", len(done), n)
	}
	return err
}

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
	e := newPlanEnv(t)
	e.addTasks(n)

	tx, err := e.conn.Begin(ctx)
	require.NoError(t, err)
	defer tx.Rollback(ctx) //nolint:errcheck // the test's changes are rolled back
	e.explainPlans(tx)
	_, err = tx.Exec(ctx, "SET LOCAL plan_cache_mode = force_generic_plan")
	require.NoError(t, err)
	// Verbose: the plans show the expressions each node computes.
	_, err = tx.Exec(ctx, "SET LOCAL auto_explain.log_verbose = on")
	require.NoError(t, err)
	require.NoError(t, e.leaseAndComplete(tx, n))

	removed := regexp.MustCompile(`Rows Removed by Join Filter: (\d+)`)
	// Nor does the completion look a task or a run up in the batch's
	// arrays by reading them from the start (a filter "= ANY ($n)",
	// array_position): quadratic in the batch too, 25 ms for 3,000
	// results (migration 00069). (The lease's filters of that form read
	// the agents' and the rate classes' arrays, not the batch's.)
	scanned := regexp.MustCompile(`Filter: .*= ANY \(\$\d+\)|array_position\(`)
	completion := 0
	for _, p := range e.plans() {
		if strings.Contains(p, "-- name: TaskComplete ") || strings.Contains(p, "DELETE FROM ax.execution e") {
			completion++
			require.False(t, scanned.MatchString(p), "the completion scans a bound array:\n%s", p)
		}
	}
	require.GreaterOrEqual(t, completion, 2, "auto_explain's plans of TaskComplete and of the runs' end")
	for _, name := range []string{"TaskLeaseTake", "TaskComplete"} {
		var plan string
		for _, p := range e.plans() {
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
	e := newPlanEnv(t)
	leaseOne := func() {
		t.Helper()
		_, err := db.WithBatchTxV(ctx, e.conn, 1, func(tx pgx.Tx) (struct{}, error) {
			return struct{}{}, e.leaseAndComplete(tx, 1)
		})
		require.NoError(t, err)
	}
	// The plans are made on a queue of one task at a time.
	for range 3 {
		e.addTasks(1)
		leaseOne()
	}
	e.addTasks(20_000)
	e.explainPlans(e.conn)
	leaseOne()
	_, err := e.conn.Exec(ctx, "SET client_min_messages = notice")
	require.NoError(t, err)

	var seen int
	for _, p := range e.plans() {
		if !strings.Contains(p, "ax.task") {
			continue
		}
		seen++
		require.NotContains(t, p, "Seq Scan on task ", "a statement scans every task:\n%s", p)
	}
	require.Positive(t, seen, "auto_explain's plans of the lease and the completion")
}

// TestLargeBatchPlansReadRunsByKey: a large batch's custom plans read the
// runs of the tasks it leases by key. At the default random_page_cost,
// Postgres scanned the whole execution table to start the runs of 400 of
// 10,000 pending tasks.
func TestLargeBatchPlansReadRunsByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 400
	e := newPlanEnv(t)
	e.addTasks(10_000)
	e.explainPlans(e.conn)
	_, err := db.WithBatchTxV(ctx, e.conn, n, func(tx pgx.Tx) (struct{}, error) {
		return struct{}{}, e.leaseAndComplete(tx, n)
	})
	require.NoError(t, err)
	_, err = e.conn.Exec(ctx, "SET client_min_messages = notice")
	require.NoError(t, err)

	var seen int
	for _, p := range e.plans() {
		if strings.Contains(p, "-- name: TaskLeaseTake ") {
			seen++
			require.False(t, strings.Contains(p, "Seq Scan on execution "), "TaskLeaseTake scans every run")
		}
	}
	require.Equal(t, 1, seen, "auto_explain's plan of the lease")
}

// TestLiveAgentsAreReadThroughAnIndex: with 20,000 offline agents (agents
// are never deleted, and a restarted pod registers a new one), the
// router's read of the live agents, which runs once a second inside
// fires, and the reaper's of the silent ones read agent_present_idx, not
// the whole table: their predicates did not imply agent_live_idx's.
func TestLiveAgentsAreReadThroughAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t)
	_, err := e.conn.Exec(ctx, `
		INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state, last_heartbeat_at)
		SELECT gen_random_uuid(), 'gone-' || i, 1, a.api_key_id, '{shell}', 'offline', now() - interval '2 days'
		FROM generate_series(1, 20000) AS i, (SELECT api_key_id FROM ax.agent LIMIT 1) a`)
	require.NoError(t, err)
	_, err = e.conn.Exec(ctx, "ANALYZE ax.agent")
	require.NoError(t, err)
	e.explainPlans(e.conn)
	_, err = db.AgentListCandidates(ctx, e.conn, &db.CandidateQuery{Live: 30 * time.Second, DurationWindow: time.Hour, DurationSample: 50})
	require.NoError(t, err)
	_, err = db.AgentMarkOffline(ctx, e.conn, 30*time.Second, nil)
	require.NoError(t, err)
	var reads []string
	for _, p := range e.plans() {
		if strings.Contains(p, "AgentListCandidates") || strings.Contains(p, "AgentMarkOffline") {
			reads = append(reads, p)
		}
	}
	require.Len(t, reads, 2)
	for _, p := range reads {
		require.Contains(t, p, "agent_present_idx", p)
		require.NotContains(t, p, "Seq Scan on agent", p)
	}
}

// TestAgentPagesAreReadThroughAnIndex: with 20,000 offline agents, each
// page GET /v1/agents asks for reads the agents it lists through an
// index, with custom plans and generic ones (a connection's prepared
// statement after five runs): the agents not offline (the default, or
// one such state) through agent_present_idx, the offline ones in order
// through agent_offline_idx, agents by id by key, and their records by
// key. Before migration 00073 every call read and returned all 20,000.
func TestAgentPagesAreReadThroughAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t)
	_, err := e.conn.Exec(ctx, `
		INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state, last_heartbeat_at)
		SELECT gen_random_uuid(), 'gone-' || (i % 1000), 1, a.api_key_id, '{shell}', 'offline', now() - interval '2 days'
		FROM generate_series(1, 20000) AS i, (SELECT api_key_id FROM ax.agent LIMIT 1) a`)
	require.NoError(t, err)
	_, err = e.conn.Exec(ctx, "ANALYZE ax.agent")
	require.NoError(t, err)
	var offline []uuid.UUID
	rows, err := e.conn.Query(ctx, "SELECT id FROM ax.agent WHERE state = 'offline' ORDER BY name, id LIMIT 3")
	require.NoError(t, err)
	offline, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)

	active, gone := axtype.AgentActive, axtype.AgentOffline
	pages := map[string]struct {
		p     db.AgentListParams
		index string
		want  []uuid.UUID
	}{
		"not offline":   {db.AgentListParams{Limit: 101}, "agent_present_idx", []uuid.UUID{e.agentID}},
		"active":        {db.AgentListParams{State: &active, Limit: 101}, "agent_present_idx", []uuid.UUID{e.agentID}},
		"offline":       {db.AgentListParams{State: &gone, Limit: 2}, "agent_offline_idx", offline[:2]},
		"offline after": {db.AgentListParams{State: &gone, After: &offline[0], Limit: 2}, "agent_offline_idx", offline[1:3]},
		"by id":         {db.AgentListParams{IDs: []uuid.UUID{offline[1], e.agentID}, Limit: 101}, "agent_pkey", []uuid.UUID{offline[1], e.agentID}},
	}
	for _, mode := range []string{"auto", "force_generic_plan"} {
		_, err := e.conn.Exec(ctx, "SET plan_cache_mode = "+mode)
		require.NoError(t, err)
		for name, page := range pages {
			e.mu.Lock()
			e.notices = nil
			e.mu.Unlock()
			e.explainPlans(e.conn)
			agents, err := db.AgentList(ctx, e.conn, &page.p)
			require.NoError(t, err)
			_, err = e.conn.Exec(ctx, "SET client_min_messages = notice")
			require.NoError(t, err)
			got := make([]uuid.UUID, len(agents))
			for i, a := range agents {
				got[i] = a.ID
			}
			require.Equal(t, page.want, got, "%s, %s", name, mode)

			var reads []string
			for _, p := range e.plans() {
				if strings.Contains(p, "-- name: AgentPage") || strings.Contains(p, "-- name: AgentList ") {
					reads = append(reads, p)
				}
			}
			require.Len(t, reads, 2, "%s, %s: auto_explain's plans of the page and its records", name, mode)
			require.Contains(t, reads[0], page.index, "%s, %s", name, mode)
			require.Contains(t, reads[1], "agent_pkey", "%s, %s", name, mode)
			for _, p := range reads {
				require.NotContains(t, p, "Seq Scan on agent", "%s, %s:\n%s", name, mode, p)
			}
		}
	}
}

// TestGoneAgentsAreFoundByKey: each replica asks every few seconds which
// of the agents its metrics have series of are gone; with 20,000 offline
// agents, asking about 1,000 reads them by key, not the whole table.
func TestGoneAgentsAreFoundByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t)
	rows, err := e.conn.Query(ctx, `
		INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state, last_heartbeat_at)
		SELECT gen_random_uuid(), 'gone-' || i, 1, a.api_key_id, '{shell}', 'offline', now() - interval '2 days'
		FROM generate_series(1, 20000) AS i, (SELECT api_key_id FROM ax.agent LIMIT 1) a
		RETURNING id`)
	require.NoError(t, err)
	offline, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	require.NoError(t, err)
	_, err = e.conn.Exec(ctx, "ANALYZE ax.agent")
	require.NoError(t, err)
	ids := append([]uuid.UUID{e.agentID, uuid.New()}, offline[:998]...)
	for _, mode := range []string{"auto", "force_generic_plan"} {
		_, err := e.conn.Exec(ctx, "SET plan_cache_mode = "+mode)
		require.NoError(t, err)
		e.mu.Lock()
		e.notices = nil
		e.mu.Unlock()
		e.explainPlans(e.conn)
		gone, err := db.AgentListGone(ctx, e.conn, ids)
		require.NoError(t, err)
		_, err = e.conn.Exec(ctx, "SET client_min_messages = notice")
		require.NoError(t, err)
		require.ElementsMatch(t, ids[1:], gone, "%s: all but the live agent", mode)
		var seen int
		for _, p := range e.plans() {
			if strings.Contains(p, "-- name: AgentListGone ") {
				seen++
				require.NotContains(t, p, "Seq Scan on agent", "%s:\n%s", mode, p)
			}
		}
		require.Equal(t, 1, seen, "%s: auto_explain's plan of AgentListGone", mode)
	}
}

// TestTheAgentsMetricIsReadThroughIndexes: the agents metric (every
// scrape of every replica) counts the agents not offline and those
// offline heard from in the last day. With 20,000 agents offline for two
// days it reads neither them nor the table: before, its one OR read the
// whole table (a sequential scan of the 20,000). The counts are right.
func TestTheAgentsMetricIsReadThroughIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t)
	_, err := e.conn.Exec(ctx, `
		INSERT INTO ax.agent (id, name, capacity, api_key_id, executors, state, last_heartbeat_at)
		SELECT gen_random_uuid(), 'gone-' || i, 1, a.api_key_id, '{shell}', 'offline',
		       now() - CASE WHEN i <= 3 THEN interval '1 hour' ELSE interval '2 days' END
		FROM generate_series(1, 20000) AS i, (SELECT api_key_id FROM ax.agent LIMIT 1) a;
		ANALYZE ax.agent`)
	require.NoError(t, err)
	e.explainPlans(e.conn)
	counts, _, err := db.AgentCountByState(ctx, e.conn)
	require.NoError(t, err)
	byState := map[axtype.AgentState]int64{}
	for _, c := range counts {
		byState[c.State] += c.Agents
	}
	require.Equal(t, map[axtype.AgentState]int64{axtype.AgentActive: 1, axtype.AgentOffline: 3}, byState)
	var read []string
	for _, p := range e.plans() {
		if strings.Contains(p, "AgentCountByState") {
			read = append(read, p)
		}
	}
	require.Len(t, read, 1)
	require.NotContains(t, read[0], "Seq Scan on agent", read[0])
	require.Contains(t, read[0], "agent_offline_recent_idx", read[0])
}
