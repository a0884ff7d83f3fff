package pglocal

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestFindStartsThrowawayCluster(t *testing.T) {
	t.Parallel()
	ctx := t.Context()

	began := time.Now()
	srv := find(t, Options{SkipEnv: true, SkipLocal: true})
	t.Logf("cluster started in %s", time.Since(began).Round(time.Millisecond))
	require.Equal(t, SourceStarted, srv.Source)
	require.Equal(t, []string{"DATABASE_URL=" + srv.URL}, srv.Env())

	conn := connect(t, srv.URL)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	require.Equal(t, 1, one)
	_, err := conn.Exec(ctx, "CREATE TABLE ax_probe (id bigint PRIMARY KEY)")
	require.NoError(t, err)
	require.NoError(t, conn.Close(ctx))

	began = time.Now()
	require.NoError(t, srv.Stop())
	t.Logf("cluster stopped in %s", time.Since(began).Round(time.Millisecond))
	require.NoDirExists(t, srv.Dir)
	require.False(t, answers(t, srv.URL), "port still answers after Stop")
	require.NoError(t, srv.Stop(), "second Stop")
}

// TestFindPrefersEnv is not parallel because it sets DATABASE_URL.
func TestFindPrefersEnv(t *testing.T) {
	const url = "postgres://ax@db.invalid:5432/ax?sslmode=disable"
	t.Setenv("DATABASE_URL", url)

	srv, err := Find(t.Context(), Options{Logger: testLogger(t), search: emptySearch(t)})
	require.NoError(t, err)
	require.Equal(t, &Server{URL: url, Source: SourceEnv}, srv)
	require.NoError(t, srv.Stop())
}

func TestFindLocal(t *testing.T) {
	t.Parallel()
	if err := ping(t.Context(), localURL, localTimeout); err != nil {
		t.Skipf("no PostgreSQL on 127.0.0.1:5432 accepting user postgres without a password: %v", err)
	}

	srv := find(t, Options{SkipEnv: true, search: emptySearch(t)})
	require.Equal(t, SourceLocal, srv.Source)
	require.Equal(t, localURL, srv.URL)
	require.Empty(t, srv.Dir)
	require.NoError(t, srv.Stop())
	require.True(t, answers(t, srv.URL), "Stop must leave a server it did not start alone")
}

func TestFindWithoutBinaries(t *testing.T) {
	t.Parallel()

	_, err := Find(t.Context(), Options{SkipEnv: true, SkipLocal: true, Logger: testLogger(t), search: emptySearch(t)})
	require.ErrorIs(t, err, ErrNoBinaries)
	require.EqualError(t, err, "error starting PostgreSQL: no PostgreSQL server binaries found (initdb, pg_ctl): "+
		"install them with `apt-get install postgresql` (Debian/Ubuntu), `brew install postgresql@16` (macOS), "+
		"or set DATABASE_URL")
}

// TestFindReusesDir plays a developer's kept cluster: a half-made folder is
// redone, a kept cluster keeps its data, and a server left running by a
// crashed run is stopped and its cluster reused.
func TestFindReusesDir(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := clusterDir(t)
	require.NoError(t, os.MkdirAll(filepath.Join(dir, dataDir, "base"), 0o700)) // as left by a killed initdb

	kept := find(t, Options{Dir: dir, Keep: true, SkipEnv: true, SkipLocal: true})
	execSQL(t, kept.URL, "CREATE TABLE ax_probe (id bigint PRIMARY KEY); INSERT INTO ax_probe VALUES (42)")
	require.NoError(t, kept.Stop())
	require.FileExists(t, filepath.Join(dir, dataDir, "PG_VERSION"))

	crashed, err := Find(ctx, Options{Dir: dir, SkipEnv: true, SkipLocal: true, Logger: testLogger(t)})
	require.NoError(t, err) // never stopped: its process "crashed"

	reused := find(t, Options{Dir: dir, SkipEnv: true, SkipLocal: true})
	require.False(t, answers(t, crashed.URL), "server of the crashed run still answers")
	var id int
	require.NoError(t, connect(t, reused.URL).QueryRow(ctx, "SELECT id FROM ax_probe").Scan(&id))
	require.Equal(t, 42, id)

	require.NoError(t, reused.Stop())
	require.NoDirExists(t, dir)
}

// TestStartOnTakenPort checks the server log is read right to tell a port
// race, which startOnFreePort retries, from other failures.
func TestStartOnTakenPort(t *testing.T) {
	t.Parallel()
	srv := find(t, Options{SkipEnv: true, SkipLocal: true})
	require.NoError(t, srv.cluster.stop(stopFast))

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	err = srv.cluster.startOn(t.Context(), l.Addr().(*net.TCPAddr).Port)
	require.ErrorIs(t, err, errPortTaken)

	port, err := srv.cluster.startOnFreePort(t.Context())
	require.NoError(t, err)
	execSQL(t, clusterURL(port), "SELECT 1")
}

// find calls Find and stops the server when the test ends, even if it fails.
func find(t *testing.T, opts Options) *Server {
	t.Helper()
	opts.Logger = testLogger(t)
	srv, err := Find(t.Context(), opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, srv.Stop()) })
	return srv
}

// clusterDir returns a folder for Options.Dir that the postgres user can
// reach when tests run as root (t.TempDir's parent is private to root).
func clusterDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "axpgtest-")
	require.NoError(t, err)
	t.Cleanup(func() {
		leftover := templateCluster(t)
		leftover.dir = dir
		assert.NoError(t, leftover.stop(stopImmediate))
		assert.NoError(t, os.RemoveAll(dir))
	})
	return dir
}

func binDir(t *testing.T) string {
	t.Helper()
	bin, err := defaultSearch().find(t.Context())
	require.NoError(t, err)
	return bin
}

// emptySearch plays a machine without PostgreSQL, and makes tests fail fast
// instead of starting a cluster they did not expect.
func emptySearch(t *testing.T) *binSearch {
	root := t.TempDir()
	return &binSearch{path: root, globs: []string{filepath.Join(root, "*", "bin")}}
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func execSQL(t *testing.T, url, sql string) {
	t.Helper()
	_, err := connect(t, url).Exec(t.Context(), sql)
	require.NoError(t, err)
}

// answers reports whether something accepts TCP connections at url's address.
func answers(t *testing.T, url string) bool {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	require.NoError(t, err)
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port))), time.Second)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	require.NoError(t, err)
	_, err = p.Wait()
	require.NoError(t, err)
	return p.Pid
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), nil))
}
