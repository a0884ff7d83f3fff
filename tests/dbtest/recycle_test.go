package dbtest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"
)

func TestMain(m *testing.M) { Main(m) }

// TestRecycledDatabaseIsAsFresh: a test that only wrote rows leaves its
// database to the next test, which finds it empty but for the seed rows,
// with its sequences and statistics counters as in a fresh copy; a test
// that changed anything else leaves its database to be dropped.
func TestRecycledDatabaseIsAsFresh(t *testing.T) {
	ctx := context.Background()
	var fresh struct {
		seeds    int64
		setting  string
		sequence int64
	}
	var name string
	t.Run("writes rows", func(t *testing.T) {
		conn := connect(t, NewURL(t))
		name = currentDatabase(t, conn)
		exec(t, conn, `SELECT count(*) FROM ax.history_setting`, &fresh.seeds)
		exec(t, conn, `SELECT s::text FROM ax.history_setting s`, &fresh.setting)
		exec(t, conn, `SELECT nextval('ax.river_job_id_seq')`, &fresh.sequence)
		exec(t, conn, `INSERT INTO ax.job (name, trigger_kind, executor_kind, executor, agentless)
			VALUES ('recycled', 'manual', 'shell', '{"kind": "shell", "command": "true"}', false)`)
		exec(t, conn, `INSERT INTO ax.river_job (args, kind, max_attempts, queue, state, priority)
			VALUES ('{}', 'k', 1, 'q', 'available', 1)`)
		// As an ax serve does when it starts: a seed row is put back.
		exec(t, conn, `UPDATE ax.history_setting SET failed_retention = failed_retention * 2, updated_at = now()`)
		conn.Close(ctx)
	})
	if !slices.Contains(free, name) {
		t.Fatalf("database %s of a test that wrote rows only was not recycled", name)
	}

	t.Run("finds it fresh", func(t *testing.T) {
		conn := connect(t, NewURL(t))
		if got := currentDatabase(t, conn); got != name {
			t.Fatalf("got database %s, want the recycled %s", got, name)
		}
		var jobs, riverJobs, seeds, sequence, inserted int64
		var setting string
		exec(t, conn, `SELECT s::text FROM ax.history_setting s`, &setting)
		if setting != fresh.setting {
			t.Fatalf("recycled database: history setting %s, fresh %s", setting, fresh.setting)
		}
		exec(t, conn, `SELECT count(*) FROM ax.job`, &jobs)
		exec(t, conn, `SELECT count(*) FROM ax.river_job`, &riverJobs)
		exec(t, conn, `SELECT count(*) FROM ax.history_setting`, &seeds)
		exec(t, conn, `SELECT coalesce(sum(n_tup_ins), 0)::bigint FROM pg_stat_user_tables`, &inserted)
		exec(t, conn, `SELECT nextval('ax.river_job_id_seq')`, &sequence)
		if jobs != 0 || riverJobs != 0 || seeds != fresh.seeds || sequence != fresh.sequence || inserted != 0 {
			t.Fatalf("recycled database: %d jobs, %d river jobs, %d history settings (fresh: %d), next river job id %d (fresh: %d), %d rows inserted by the counters",
				jobs, riverJobs, seeds, fresh.seeds, sequence, fresh.sequence, inserted)
		}
		conn.Close(ctx)
	})

	for _, change := range []struct{ name, sql string }{
		{"creates a table", `CREATE TABLE ax.extra (id int)`},
		{"adds a column", `ALTER TABLE ax.job ADD COLUMN extra int`},
		{"drops an index", `DROP INDEX ax.delayed_run_cancelled_idx`},
		{"drops a view", `DROP VIEW ax.all_executions CASCADE`},
		{"drops a trigger", `DROP TRIGGER api_key_revoked_notify ON ax.api_key`}, // deletes catalog rows only
		{"replaces a function", `CREATE OR REPLACE FUNCTION ax.recycle_probe() RETURNS int LANGUAGE sql AS 'SELECT 1'`},
		{"grants", `GRANT SELECT ON ax.job TO PUBLIC`},
		{"analyzes", `ANALYZE ax.job`},
		{"vacuums", `VACUUM ax.job`},
		{"sets a database setting", `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET work_mem = ''8MB''', current_database()); END $$`},
		{"writes many rows", `INSERT INTO ax.nonce (key_id, nonce, expires_at) SELECT gen_random_uuid(), md5(i::text), now() FROM generate_series(1, 20001) i`},
	} {
		t.Run(change.name, func(t *testing.T) {
			conn := connect(t, NewURL(t))
			name = currentDatabase(t, conn)
			exec(t, conn, change.sql)
			conn.Close(ctx)
		})
		if slices.Contains(free, name) {
			t.Errorf("database %s of a test that %s was recycled", name, change.name)
		}
	}
}

// TestDatabaseWithSessionsIsDropped: a database some session is still
// connected to when its test ends (a process the test did not stop) is
// not given to another test.
func TestDatabaseWithSessionsIsDropped(t *testing.T) {
	var name string
	var left *pgx.Conn
	t.Run("leaves a session", func(t *testing.T) {
		url := NewURL(t)
		var err error
		if left, err = pgx.Connect(context.Background(), url); err != nil {
			t.Fatal(err)
		}
		name = currentDatabase(t, left)
	})
	if left != nil {
		defer left.Close(context.Background())
	}
	if slices.Contains(free, name) {
		t.Errorf("database %s, which a session still used, was recycled", name)
	}
}

func connect(t testing.TB, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func currentDatabase(t testing.TB, conn *pgx.Conn) string {
	t.Helper()
	var name string
	exec(t, conn, `SELECT current_database()`, &name)
	return name
}

// exec runs sql and scans its one row into dest, if any.
func exec(t testing.TB, conn *pgx.Conn, sql string, dest ...any) {
	t.Helper()
	var err error
	if len(dest) == 0 {
		_, err = conn.Exec(context.Background(), sql)
	} else {
		err = conn.QueryRow(context.Background(), sql).Scan(dest...)
	}
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestSweepDropsIdleLeftovers: the sweep at set-up drops old test
// databases no session uses (what a killed process left), and keeps one
// a session still uses. Its own prefix keeps it from the other tests'.
func TestSweepDropsIdleLeftovers(t *testing.T) {
	ctx := context.Background()
	admin := connect(t, AdminURL(t))
	idle, busy := "ax_sweeptest_"+randomHex(6), "ax_sweeptest_"+randomHex(6)
	for _, name := range []string{idle, busy} {
		exec(t, admin, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
		t.Cleanup(func() { _ = dropDatabase(ctx, admin, name) })
	}
	busyURL, err := db.WithDatabase(AdminURL(t), busy)
	if err != nil {
		t.Fatal(err)
	}
	connect(t, busyURL)

	sweepStale(ctx, AdminURL(t), "ax_sweeptest_", time.Hour)
	if left := databases(t, admin, idle, busy); len(left) != 2 {
		t.Fatalf("a sweep of databases older than an hour dropped one made just now: left %v", left)
	}
	sweepStale(ctx, AdminURL(t), "ax_sweeptest_", 0)
	if left := databases(t, admin, idle, busy); !slices.Equal(left, []string{busy}) {
		t.Fatalf("after the sweep: %v, want only the one in use (%s)", left, busy)
	}
}

// databases returns which of names exist.
func databases(t testing.TB, conn *pgx.Conn, names ...string) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `SELECT datname FROM pg_database WHERE datname = ANY($1) ORDER BY datname`, names)
	if err != nil {
		t.Fatal(err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// FuzzDatabaseIsDroppedAtOnce: a fuzz target's database is dropped when
// the target ends, not at the end of the process, which a fuzz worker
// may not reach. (Its seed runs as a test under go test.)
func FuzzDatabaseIsDroppedAtOnce(f *testing.F) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, AdminURL(f))
	if err != nil {
		f.Fatal(err)
	}
	var name string
	f.Cleanup(func() { // registered first, so it runs after NewURL's
		defer admin.Close(ctx)
		if left := databases(f, admin, name); len(left) != 0 {
			f.Errorf("database %s of a fuzz target was still there after the target ended", name)
		}
	})
	conn := connect(f, NewURL(f))
	name = currentDatabase(f, conn)
	conn.Close(ctx)
	f.Add(0)
	f.Fuzz(func(t *testing.T, _ int) {})
}
