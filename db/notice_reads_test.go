package db_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestANoticeReadsFewRowsOfItsURL: ax.notice_add runs in the transaction
// that ends a run (the completion batch every agent's results share).
// With 20,000 notices already sent to a URL that 50 jobs name, and 5,000
// held back, a new notice reads a handful of rows of that URL; before, its
// rate limit read them all (the last sent, and the held back since)
// through each job's target. The held-back count still comes out right:
// three notices held back after the last sent, then one that goes says 3.
func TestANoticeReadsFewRowsOfItsURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newPlanEnv(t)
	_, err := e.conn.Exec(ctx, `
		UPDATE ax.notice_setting SET per_minute = 5;
		INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
		SELECT 'noticed-' || i, 'manual', 'shell', '{"kind": "shell", "command": "true"}', false
		FROM generate_series(1, 50) AS i;
		INSERT INTO ax.notice_target (job_id, position, kind, url, events)
		SELECT id, 0, 'webhook', 'https://hooks.example.test/shared', '{failed}' FROM ax.job WHERE name LIKE 'noticed-%';
		INSERT INTO ax.notice (job_id, target_id, url, event, state, created_at)
		SELECT t.job_id, t.id, t.url, 'failed', CASE WHEN i % 5 = 1 THEN 'rate_limited' ELSE 'delivered' END::ax.notice_state,
		       now() - interval '2 days'
		FROM generate_series(1, 25000) AS i
		JOIN ax.notice_target t ON t.id = (SELECT min(id) FROM ax.notice_target) + i % 50;
		ANALYZE ax.notice; ANALYZE ax.notice_target`)
	require.NoError(t, err)
	add := func() {
		t.Helper()
		_, err := e.conn.Exec(ctx, `SELECT ax.notice_add(t, 'failed', NULL, 'x', 1)
			FROM ax.notice_target t WHERE t.job_id = (SELECT id FROM ax.job WHERE name = 'noticed-7')`)
		require.NoError(t, err)
	}
	e.explainPlans(e.conn)
	add()
	actualRows := regexp.MustCompile(`actual rows=(\d+)`)
	var reads int
	for _, p := range e.plans() {
		if !strings.Contains(p, "ax.notice n") {
			continue
		}
		reads++
		for _, m := range actualRows.FindAllStringSubmatch(p, -1) {
			n, err := strconv.Atoi(m[1])
			require.NoError(t, err)
			require.LessOrEqual(t, n, 5, "a read of the notices of one URL:\n%s", p)
		}
	}
	require.GreaterOrEqual(t, reads, 3, "the rate limit's reads were explained")

	for range 7 { // 4 more go (5 within the minute), then 3 are held back
		add()
	}
	var states []string
	var coalesced []int
	rows, err := e.conn.Query(ctx, `SELECT state::text, coalesced FROM ax.notice WHERE created_at > now() - interval '1 hour' ORDER BY id`)
	require.NoError(t, err)
	for rows.Next() {
		var s string
		var c int
		require.NoError(t, rows.Scan(&s, &c))
		states, coalesced = append(states, s), append(coalesced, c)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"pending", "pending", "pending", "pending", "pending", "rate_limited", "rate_limited", "rate_limited"}, states)
	require.Equal(t, []int{0, 0, 0, 0, 0, 0, 1, 2}, coalesced, "a held-back notice counts those held before it")

	_, err = e.conn.Exec(ctx, `UPDATE ax.notice SET created_at = created_at - interval '61 seconds'
		WHERE created_at > now() - interval '1 hour'`)
	require.NoError(t, err)
	add()
	var last int
	require.NoError(t, e.conn.QueryRow(ctx, `SELECT coalesced FROM ax.notice WHERE state = 'pending' ORDER BY id DESC LIMIT 1`).Scan(&last))
	require.Equal(t, 3, last, "the next that goes tells of the three held back")
}
