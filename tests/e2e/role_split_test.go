package e2e

import (
	"context"
	"crypto/rand"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestOwnerAndRuntimeRoles runs the owner/runtime split of the managed
// Postgres guide: `ax migrate up` as an owner role that may create in
// the database but is no superuser, the documented grants script
// (sql/runtime_role.sql) as the owner, then `ax serve --no-migrate` as a
// runtime role holding only those grants. Jobs run on a real agent, the
// schema version lives in schema ax, and the vacuumer says once, by a log
// line and ax_vacuum_denied, that it may not vacuum, counting no vacuum.
func TestOwnerAndRuntimeRoles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	adminURL := dbtest.NewBlank(t).Config().ConnString()
	admin := e2ekit.OpenPool(t, adminURL)
	suffix := strings.ToLower(rand.Text()[:8])
	owner, runtime := "ax_owner_"+suffix, "ax_runtime_"+suffix
	dbName := strings.TrimPrefix(mustParse(t, adminURL).Path, "/")
	for _, stmt := range []string{
		"CREATE ROLE " + owner + " LOGIN NOSUPERUSER",
		"CREATE ROLE " + runtime + " LOGIN NOSUPERUSER",
		"GRANT CREATE ON DATABASE " + pgx.Identifier{dbName}.Sanitize() + " TO " + owner,
	} {
		_, err := admin.Exec(ctx, stmt)
		require.NoError(t, err, stmt)
	}
	t.Cleanup(func() {
		// The database goes with the test; what the roles own and were
		// granted in it goes first, so the roles can be dropped.
		for _, role := range []string{runtime, owner} {
			_, _ = admin.Exec(context.Background(), "DROP OWNED BY "+role+" CASCADE")
			_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+role)
		}
	})
	ownerURL, runtimeURL := asRole(t, adminURL, owner), asRole(t, adminURL, runtime)

	out, err := exec.Command(proctest.Binary(t, "ax"), "migrate", "--database-url", ownerURL, "up").CombinedOutput()
	require.NoError(t, err, string(out))
	script, err := os.ReadFile("../../sql/runtime_role.sql")
	require.NoError(t, err)
	grants := strings.NewReplacer("ax_owner", owner, "ax_runtime", runtime).Replace(string(script))
	ownerConn, err := pgx.Connect(ctx, ownerURL)
	require.NoError(t, err)
	_, err = ownerConn.Exec(ctx, grants)
	require.NoError(t, err, "the documented grants script runs as the owner")
	require.NoError(t, ownerConn.Close(ctx))

	var versionInAx, versionInPublic bool
	require.NoError(t, admin.QueryRow(ctx, `SELECT to_regclass('ax.schema_version') IS NOT NULL,
		to_regclass('public.ax_schema_version') IS NOT NULL`).Scan(&versionInAx, &versionInPublic))
	require.True(t, versionInAx, "goose's version table lives in schema ax")
	require.False(t, versionInPublic)

	// History partitions of a second, kept a minute: maintenance passes
	// every half second, so the runtime role's lack of right shows at once.
	retention := []string{"AX_HISTORY_PARTITION_WIDTH=1s", "AX_HISTORY_RETENTION=60s", "AX_HISTORY_FAILED_RETENTION=60s"}
	maintain := func(url string) (string, error) {
		cmd := exec.Command(proctest.Binary(t, "ax"), "maintain", "--database-url", url)
		cmd.Env = append(os.Environ(), retention...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	said, err := maintain(runtimeURL)
	require.Error(t, err, "the runtime role may not maintain history: %s", said)
	require.Contains(t, said, "run ax maintain as "+owner)
	said, err = maintain(ownerURL)
	require.NoError(t, err, said)
	require.Regexp(t, `made [1-9][0-9]* history partitions ahead`, said, "the owner re-partitions to a second's width")

	key := "ax_e2e_bootstrap_admin_key_0123456789"
	proc := proctest.Start(t, proctest.Binary(t, "ax"), append([]string{"DATABASE_URL=" + runtimeURL, "AX_ADMIN_KEY=" + key,
		"AX_ADDR=127.0.0.1:0"}, retention...), "serve", "--no-migrate")
	s := &e2ekit.Server{URL: "http://" + proctest.WaitServing(t, proc, 90*time.Second), DBURL: runtimeURL, Key: key, Proc: proc}
	proctest.WaitHTTP(t, s.URL+"/readyz", 30*time.Second)
	startAgent(t, s, "runtime-agent", "2")
	s.AgentReady(t, "runtime-agent")
	jobID := s.CreateJob(t, map[string]any{"name": "as-runtime", "trigger": map[string]any{"kind": "manual"},
		"executor": e2ekit.Shell("echo ran as runtime")})
	execID := s.Trigger(t, jobID)
	require.Equal(t, "succeeded", s.WaitExecution(t, execID, 60*time.Second))
	require.Contains(t, s.Output(t, execID), "ran as runtime")

	var m map[string]float64
	require.Eventually(t, func() bool {
		m = scrape(t, s.URL)
		return m[`ax_vacuum_denied{table="task"}`] == 1
	}, 30*time.Second, 200*time.Millisecond, "the vacuumer reports it may not vacuum")
	for name := range m {
		require.False(t, strings.HasPrefix(name, "ax_vacuums_total{") && m[name] > 0, "no vacuum counted: %s", name)
	}
	require.Equal(t, 1, strings.Count(s.Proc.Output(), `"not allowed to vacuum a hot table`+
		`: its dead rows are left to autovacuum; vacuuming needs the table's or the database's owner (see the managed Postgres guide)","table":"task"`),
		"said once per table")
	status, _ := s.API(t, http.MethodGet, "/v1/jobs", nil)
	require.Equal(t, http.StatusOK, status)

	// History maintenance: the runtime role may not make or drop
	// partitions; the replica says so once (and by a metric) instead of
	// failing every pass, and the owner's `ax maintain` does it.
	require.Eventually(t, func() bool {
		return scrape(t, s.URL)["ax_history_maintenance_denied"] == 1
	}, 30*time.Second, 200*time.Millisecond, "maintenance reports it may not make partitions")
	require.Equal(t, 1, strings.Count(s.Proc.Output(), `"history maintenance may not make or drop partitions as this role`),
		"said once")
	require.Contains(t, s.Proc.Output(), `"owner":"`+owner+`"`)
	require.NotContains(t, s.Proc.Output(), "permission denied")
	said, err = maintain(ownerURL)
	require.NoError(t, err, said)
	require.Regexp(t, `made [1-9][0-9]* history partitions ahead`, said, "seconds later the owner makes the next ones")
}

// asRole is dbURL logged in as role (trust authentication on loopback).
func asRole(t *testing.T, dbURL, role string) string {
	t.Helper()
	u := mustParse(t, dbURL)
	u.User = url.User(role)
	return u.String()
}

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err)
	return u
}
