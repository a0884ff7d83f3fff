// Package dbtest gives each test its own Postgres database, cloned from a
// migrated template, so tests run in parallel without seeing each other's
// data. The server comes from pglocal: DATABASE_URL, 127.0.0.1:5432, or a
// throwaway cluster.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/db/pglocal"
	"github.com/ax-scheduler/ax/migrations"
)

// templateLockID serializes template creation across test processes
// (go test runs packages in parallel).
const templateLockID = 0x61785f746d706c // "ax_tmpl"

var (
	setupOnce sync.Once
	server    *pglocal.Server
	template  string
	setupErr  error
)

// Main wraps a package's TestMain: it stops a Postgres cluster the harness
// had to start once the package's tests are done.
func Main(m *testing.M) {
	os.Exit(Run(m))
}

// MainLeakChecked is Main that also fails the package when goroutines
// outlive its tests (go.uber.org/goleak): for packages that start
// background services, which must stop everything they start.
func MainLeakChecked(m *testing.M, opts ...goleak.Option) {
	code := Run(m)
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left behind by the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Run is Main without the exit, for a TestMain that has more to clean up
// after the tests; it returns m.Run's code.
func Run(m *testing.M) int {
	running.Store(true)
	code := m.Run()
	if testing.Verbose() && copied.Load() > 0 {
		fmt.Fprintf(os.Stderr, "dbtest: %d databases copied from the template; tests ended %d recycled, %d dropped\n",
			copied.Load(), recycled.Load(), dropped.Load())
	}
	if !waitDrops() && code == 0 {
		code = 1
	}
	dropShared()
	if server != nil {
		_ = server.Stop()
	}
	return code
}

// AdminURL returns the URL of the server's maintenance database.
func AdminURL(t testing.TB) string {
	t.Helper()
	setupOnce.Do(setup)
	if setupErr != nil {
		t.Fatalf("dbtest: %v", setupErr)
	}
	return server.URL
}

// NewURL gives t a migrated database of its own and returns its URL (for
// tests that start processes). Under Run, it may be one an earlier test
// of the process left as fresh (recycle.go), and once t ends it is
// recycled or dropped when the package's tests are done; otherwise it is
// a new copy, dropped once t ends.
func NewURL(t testing.TB) string {
	t.Helper()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := ""
	if recycling(t) {
		name = takeFree()
	}
	fresh := name == ""
	if fresh {
		name = "ax_test_" + randomHex(6)
		withConn(t, ctx, admin, func(conn *pgx.Conn) error {
			return createFromTemplate(ctx, conn, name)
		})
		copied.Add(1)
	}
	t.Cleanup(func() { release(t, admin, name) })
	url, err := db.WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	if fresh && recycling(t) {
		if err := noteFresh(ctx, url); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	return url
}

// recycling says whether t may get a recycled database and leave its own
// for recycling: not a benchmark, whose figures should not depend on what
// ran before it, nor a fuzz target (dropLater).
func recycling(t testing.TB) bool {
	_, benchmark := t.(*testing.B)
	_, fuzz := t.(*testing.F)
	return running.Load() && !benchmark && !fuzz && os.Getenv("AX_DBTEST_RECYCLE") != "0"
}

// release recycles database name for the process's next test (under
// Run, when t passed and left it fit: recycle.go), or drops it.
func release(t testing.TB, admin, name string) {
	t.Helper()
	if recycling(t) && !t.Failed() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if recycle(ctx, admin, name) {
			recycled.Add(1)
			putFree(name)
			return
		}
	}
	dropped.Add(1)
	dropLater(t, admin, name)
}

var (
	sharedMu  sync.Mutex
	sharedURL = map[string]string{} // by key
	sharedDBs []string              // names, to drop when the tests end
)

// SharedURL returns a migrated database made once per process for key,
// after fill ran on it, and dropped when the tests end (Run): for
// benchmarks whose set-up takes minutes, so that their runs (-count)
// share it. Callers of one key must not depend on each other's changes.
func SharedURL(t testing.TB, key string, fill func(url string)) string {
	t.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if url, ok := sharedURL[key]; ok {
		return url
	}
	admin := AdminURL(t)
	name := "ax_test_shared_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	withConn(t, ctx, admin, func(conn *pgx.Conn) error {
		return db.CreateDatabaseIfMissing(ctx, conn, name, template)
	})
	sharedDBs = append(sharedDBs, name)
	url, err := db.WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	fill(url)
	sharedURL[key] = url
	return url
}

// dropShared drops the databases SharedURL made.
func dropShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if len(sharedDBs) == 0 || server == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, server.URL)
	if err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: dropping shared databases: %v\n", err)
		return
	}
	defer conn.Close(ctx)
	for _, name := range sharedDBs {
		if err := dropDatabase(ctx, conn, name); err != nil {
			fmt.Fprintf(os.Stderr, "dbtest: dropping %s: %v\n", name, err)
		}
	}
	sharedDBs = nil
}

// New returns a pool on a fresh migrated database for t.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := NewURL(t)
	pool, err := db.Open(context.Background(), url)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// NewBlank returns a pool on a new database of t's own without any schema
// (a copy of template1, where the template starts): for tests of the
// migrations themselves, which otherwise migrated a copy of the template
// all the way down first. It is dropped once t ends (never recycled).
func NewBlank(t testing.TB) *pgxpool.Pool {
	t.Helper()
	admin := AdminURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := "ax_test_" + randomHex(6)
	withConn(t, ctx, admin, func(conn *pgx.Conn) error {
		return createFrom(ctx, conn, name, "template1")
	})
	t.Cleanup(func() { dropLater(t, admin, name) })
	url, err := db.WithDatabase(admin, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	pool, err := db.Open(ctx, url)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

func setup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	server, setupErr = pglocal.Find(ctx, pglocal.Options{})
	if setupErr != nil {
		return
	}
	template, setupErr = ensureTemplate(ctx, server.URL)
	if setupErr == nil {
		sweepStale(ctx, server.URL, "ax_test_", staleAfter)
	}
}

// staleAfter is the age past which a test database no session uses is
// left over: the suite's timeout is minutes, make bench's an hour.
const staleAfter = 2 * time.Hour

// sweepStale drops the databases named prefix+hex that no session uses
// and whose folder has not changed for olderThan: a process killed
// before its drops (most likely a fuzz worker) leaves its database
// behind. Best effort: without the right to read the folders'
// times (pg_stat_file: superuser or pg_read_server_files), nothing is
// dropped. Shared databases (SharedURL) are left alone.
func sweepStale(ctx context.Context, admin, prefix string, olderThan time.Duration) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT d.datname FROM pg_database d
		WHERE d.datname ~ ('^' || $1 || '[0-9a-f]+$') AND NOT d.datistemplate
		  AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datid = d.oid)
		  AND (pg_stat_file(format('base/%s', d.oid))).modification < now() - make_interval(secs => $2)`,
		prefix, olderThan.Seconds())
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		_ = dropDatabase(ctx, conn, name)
	}
}

// The databases of ended tests are dropped when the package's tests are
// done (Run), not as each test ends. Every DROP DATABASE forces a
// checkpoint, which syncs every file written since the last one: each
// test database is some 900 files, so drops during the run made
// checkpoints a few dozen new databases deep (34,021 files, 65 s on a
// slow disk) that each drop waited on, past its timeout, while the tests
// beside them starved for I/O. (Databases are now copied with FILE_COPY,
// which syncs their files as they are made: createFromTemplate.)
var (
	running   atomic.Bool // Run is running the tests: drops wait for their end
	dropMu    sync.Mutex
	toDrop    []string // databases of ended tests, in the order they ended
	dropAdmin string   // the server's maintenance database, for the drops
)

// dropTimeout bounds the drops at the end of a run: the first waits for
// the checkpoint of everything the run wrote.
const dropTimeout = 5 * time.Minute

// dropLater drops database name when the package's tests are done (under
// Run), else, or for a fuzz target, at once.
func dropLater(t testing.TB, admin, name string) {
	t.Helper()
	// A fuzz target's database goes at once: its worker processes can be
	// stopped before Run's drops (CI left such databases behind), and
	// each has one database, not one a test.
	if _, fuzz := t.(*testing.F); !running.Load() || fuzz {
		ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
		defer cancel()
		if err := dropAll(ctx, admin, []string{name}); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		return
	}
	dropMu.Lock()
	defer dropMu.Unlock()
	toDrop = append(toDrop, name)
	dropAdmin = admin
}

// dropAll drops names over a few connections to admin at once: every
// DROP DATABASE waits for a checkpoint, and drops waiting together share
// one.
func dropAll(ctx context.Context, admin string, names []string) error {
	const conns = 8
	work := make(chan string)
	errs := make([]error, conns)
	var wg sync.WaitGroup
	for i := range min(conns, len(names)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, admin)
			if err != nil {
				errs[i] = fmt.Errorf("error connecting: %w", err)
				for range work {
				}
				return
			}
			defer conn.Close(ctx)
			for name := range work {
				errs[i] = errors.Join(errs[i], dropDatabase(ctx, conn, name))
			}
		}()
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	return errors.Join(errs...)
}

// waitDrops drops the databases of the ended tests and reports whether
// all were dropped.
func waitDrops() bool {
	dropMu.Lock()
	names, admin := append(toDrop, takeFreeAll()...), dropAdmin
	toDrop = nil
	dropMu.Unlock()
	if admin == "" && server != nil {
		admin = server.URL // every database was recycled
	}
	if len(names) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), dropTimeout)
	defer cancel()
	if err := dropAll(ctx, admin, names); err != nil {
		fmt.Fprintf(os.Stderr, "dbtest: %v\n", err)
		return false
	}
	return true
}

// ensureTemplate creates and migrates the template database once per
// schema: its name carries a hash of the migrations, so a changed schema
// gets a new template and stale ones are never used.
func ensureTemplate(ctx context.Context, admin string) (string, error) {
	hash, err := migrationsHash()
	if err != nil {
		return "", err
	}
	name := "ax_template_" + hash
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("error connecting to %s: %w", admin, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", templateLockID); err != nil {
		return "", fmt.Errorf("error locking template creation: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", templateLockID) //nolint:errcheck
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("error looking up template: %w", err)
	}
	if exists {
		return name, nil
	}
	if err := buildTemplate(ctx, conn, admin, name); err != nil {
		return "", err
	}
	return name, nil
}

// buildTemplate migrates a new database and marks it a template; a
// half-built one from a crashed run is dropped first.
func buildTemplate(ctx context.Context, conn *pgx.Conn, admin, name string) error {
	if err := dropDatabase(ctx, conn, name); err != nil {
		return err
	}
	if err := db.CreateDatabaseIfMissing(ctx, conn, name, ""); err != nil {
		return err
	}
	url, err := db.WithDatabase(admin, name)
	if err != nil {
		return err
	}
	pool, err := db.Open(ctx, url)
	if err != nil {
		return err
	}
	err = db.Migrate(ctx, pool, nil)
	pool.Close()
	if err != nil {
		return fmt.Errorf("error migrating template: %w", err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("error marking template: %w", err)
	}
	return nil
}

func migrationsHash() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS(), path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%s\x00", path, b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("error hashing migrations: %w", err)
	}
	fmt.Fprintf(h, "go:%d river:%d", len(migrations.GoMigrations()), migrations.RiverSchemaVersion)
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func withConn(t testing.TB, ctx context.Context, url string, fn func(*pgx.Conn) error) {
	t.Helper()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("dbtest: error connecting: %v", err)
	}
	defer conn.Close(ctx)
	if err := fn(conn); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// createFromTemplate creates database name as a copy of the template,
// file by file (FILE_COPY), each file synced by the creating backend.
// The default (WAL_LOG) copies the template's ~900 files through shared
// buffers and the WAL and leaves them for the next checkpoint to sync:
// with some 300 databases a run, the checkpoints that drops force synced
// up to 75,000 files at once (213 s), one checkpoint at a time, while
// every drop and the tests beside them waited; make test took 547 s, and
// 384 and 393 s with FILE_COPY (its syncs run in the creating backends,
// side by side, and each checkpoint finds only what the tests wrote).
// Before PostgreSQL 15, FILE_COPY was the only way and had no keyword.
func createFromTemplate(ctx context.Context, conn *pgx.Conn, name string) error {
	return createFrom(ctx, conn, name, template)
}

// createFrom creates database name as a copy of database from, file by
// file (see createFromTemplate).
func createFrom(ctx context.Context, conn *pgx.Conn, name, from string) error {
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{from}.Sanitize()
	if serverMajor(conn) >= 15 {
		sql += " STRATEGY FILE_COPY"
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		return fmt.Errorf("error creating database %s: %w", name, err)
	}
	return nil
}

// serverMajor returns the server's major version, or 0 if it cannot tell.
func serverMajor(conn *pgx.Conn) int {
	major, _, _ := strings.Cut(conn.PgConn().ParameterStatus("server_version"), ".") // "15.20 (Debian …)"
	version, _ := strconv.Atoi(major)
	return version
}

// dropDatabase drops database name, disconnecting its sessions first.
func dropDatabase(ctx context.Context, conn *pgx.Conn, name string) error {
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("error dropping database %s: %w", name, err)
	}
	return nil
}
