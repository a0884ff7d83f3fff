package db_test

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
)

// TestLeasePoolSharesKeepTheLeasesRules: ax.lease_pool_shares (migration
// 00090) counts each pool's share of a lease's group by TaskLeasePick's
// rules, written out again in the function so that a lease's plan stays
// small. Each group's rules in TaskLeasePick (its locking read of a
// pool), with the statement's parameters named as the function's, are
// in the function as it is in a migrated database: a rule changed in
// the statement and not in the function fails here. (One way only: a
// rule added to the function alone, just before its ORDER BY, is not
// seen.)
func TestLeasePoolSharesKeepTheLeasesRules(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../sql/queries/task.sql")
	require.NoError(t, err)
	query := string(src)
	start := strings.Index(query, "-- name: TaskLeasePick ")
	require.GreaterOrEqual(t, start, 0)
	query = query[start:]
	query = query[:strings.Index(query, "\n-- name: ")]

	pool := dbtest.New(t)
	var def string
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT pg_get_functiondef('ax.lease_pool_shares'::regproc)`).Scan(&def))
	def = normalizeSQL(def)

	params := strings.NewReplacer(
		"@taken::uuid[]", "p_taken",
		"coalesce(sqlc.narg('now')::timestamptz, now())", "p_now",
		"sqlc.arg('starve_seconds')::double precision", "p_starve_seconds",
		"sqlc.arg('steal_seconds')::double precision", "p_steal_seconds",
		"sqlc.arg('steal_any_seconds')::double precision", "p_steal_any_seconds",
		"@agent_labels::jsonb", "p_labels",
		"@executors::text[]", "p_executors",
		"@label_bound::boolean", "p_label_bound",
		"@classes::text[]", "p_classes",
		"@agent_ids::uuid[]", "p_agents",
		// stealable's: the tasks own took, passed in.
		"ARRAY(SELECT o.id FROM own o)", "p_own",
	)
	for _, group := range []string{"starved", "unassigned", "stealable"} {
		at := strings.Index(query, "), "+group+" AS (\n")
		require.GreaterOrEqual(t, at, 0, group)
		block := query[at:]
		from := strings.Index(block, "WHERE t.pool_id = p.id")
		to := strings.Index(block[from:], "ORDER BY ")
		require.True(t, from >= 0 && to >= 0, group)
		var rules []string
		for _, line := range strings.Split(block[from:from+to], "\n") {
			// The room the groups before it leave is the function's
			// p_room: said of the statement's own results.
			if strings.Contains(line, "FROM own)") || strings.Contains(line, "FROM unassigned)") {
				continue
			}
			rules = append(rules, line)
		}
		want := normalizeSQL(params.Replace(strings.Join(rules, "\n")))
		require.Contains(t, def, want, "%s's rules in ax.lease_pool_shares", group)
	}
}

var sqlComment = regexp.MustCompile(`--[^\n]*`)

// normalizeSQL drops comments and makes each run of white space one space.
func normalizeSQL(s string) string {
	return strings.Join(strings.Fields(sqlComment.ReplaceAllString(s, "")), " ")
}
