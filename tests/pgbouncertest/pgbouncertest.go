// Package pgbouncertest runs a real PgBouncer in transaction mode in front
// of a test's Postgres, as managed providers' pooled endpoints do: its
// stock configuration but for pool_mode, on a loopback port of its own,
// stopped by PID and removed when the test ends, also when it fails.
package pgbouncertest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-scheduler/ax/tests/proctest"
)

// Binary returns the pgbouncer binary. Without one the test is skipped,
// or fails when CI is set (.ci/run installs Debian's pgbouncer package).
func Binary(t testing.TB) string {
	t.Helper()
	for _, p := range []string{"pgbouncer", "/usr/sbin/pgbouncer"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("pgbouncertest: pgbouncer is not installed (apt-get install pgbouncer); CI is set, so this fails")
	}
	t.Skip("pgbouncertest: pgbouncer is not installed (apt-get install pgbouncer)")
	return ""
}

// Start runs PgBouncer with pool_mode = transaction in front of the
// server of dbURL (trust authentication on loopback, as the tests'
// Postgres) for the roles users (dbURL's own always) and returns dbURL
// with the pooler's address in place of the server's.
func Start(t testing.TB, dbURL string, users ...string) string {
	t.Helper()
	bin := Binary(t)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	dir := configDir(t)
	users = append(users, u.User.Username())
	var list strings.Builder
	for _, name := range users {
		fmt.Fprintf(&list, "%q \"\"\n", name)
	}
	writeFile(t, filepath.Join(dir, "userlist.txt"), list.String())
	addr := proctest.FreeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	serverHost, serverPort := u.Hostname(), u.Port()
	if serverPort == "" {
		serverPort = "5432"
	}
	// The stock pgbouncer.ini's settings (pool sizes, timeouts, no
	// ignore_startup_parameters) but for pool_mode, the address and the
	// loopback trust that the tests' Postgres uses.
	writeFile(t, filepath.Join(dir, "pgbouncer.ini"), fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = %s
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
max_client_conn = 100
default_pool_size = 20
`, serverHost, serverPort, host, port, filepath.Join(dir, "userlist.txt")))
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		// PgBouncer refuses to run as root; it drops to this user.
		args = append([]string{"-u", unprivilegedUser(t)}, args...)
	}
	proc := proctest.Start(t, bin, nil, args...)
	waitListening(t, proc, addr)
	u.Host = addr
	return u.String()
}

// configDir is a directory the unprivileged user PgBouncer runs as can
// read, removed when the test ends.
func configDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pgbouncertest-")
	if err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
	return dir
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatalf("pgbouncertest: %v", err)
	}
}

// unprivilegedUser is the user PgBouncer drops to when started as root:
// postgres (the server's packages make it) or nobody.
func unprivilegedUser(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"postgres", "nobody"} {
		if _, err := user.Lookup(name); err == nil {
			return name
		}
	}
	t.Fatal("pgbouncertest: running as root and no postgres or nobody user to run pgbouncer as")
	return ""
}

// waitListening waits until PgBouncer accepts connections on addr.
func waitListening(t testing.TB, proc *proctest.Process, addr string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return
		}
		if !proc.Running() {
			t.Fatalf("pgbouncertest: pgbouncer exited before listening:\n%s", proc.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncertest: pgbouncer not listening on %s within 15 s:\n%s", addr, proc.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
