//go:build faults

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// pgBinDir holds the machine's Postgres server binaries.
const pgBinDir = "/usr/lib/postgresql/15/bin"

// TestFailoverToSynchronousStandby (make faults): a throwaway primary and
// a synchronous streaming standby; 3 replicas reach them through a
// multi-host URL with target_session_attrs=read-write, 2 agents run
// every-second jobs, and mid-run the primary dies and the standby is
// promoted. No tick fires twice, no run is run twice by the agents,
// nothing is left stuck, and fires resume within 5 s of the promotion.
func TestFailoverToSynchronousStandby(t *testing.T) {
	ctx := context.Background()
	dir := clusterDir(t)
	primaryPort, standbyPort := freePort(t), freePort(t)
	primary, standby := filepath.Join(dir, "primary"), filepath.Join(dir, "standby")
	pgRun(t, "initdb", "-D", primary, "-U", "postgres", "--auth=trust", "--no-sync")
	appendConf(t, primary, "postgresql.conf", fmt.Sprintf(`port = %d
listen_addresses = '127.0.0.1'
unix_socket_directories = '%s'
wal_level = replica
max_wal_senders = 4
synchronous_standby_names = 'standby1'
`, primaryPort, dir))
	startCluster(t, primary)
	pgRun(t, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primaryPort), "-U", "postgres", "-D", standby,
		"-R", "-X", "stream")
	// After what -R wrote to postgresql.auto.conf, which wins over
	// postgresql.conf: the name synchronous_standby_names waits for, and,
	// once promoted, no standby of its own to wait for (as a managed
	// service reconfigures a promoted one).
	appendConf(t, standby, "postgresql.auto.conf", fmt.Sprintf(`port = %d
primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=standby1'
synchronous_standby_names = ''
`, standbyPort, primaryPort))
	startCluster(t, standby)

	adminURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", primaryPort)
	waitSynchronous(t, adminURL)
	admin, err := pgx.Connect(ctx, adminURL)
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE ax")
	require.NoError(t, err)
	require.NoError(t, admin.Close(ctx))

	dbURL := fmt.Sprintf("postgres://postgres@127.0.0.1:%d,127.0.0.1:%d/ax?target_session_attrs=read-write",
		primaryPort, standbyPort)
	var replicas []*e2ekit.Server
	for range 3 {
		replicas = append(replicas, e2ekit.StartServerOn(t, dbURL))
	}
	s := replicas[0]
	ranFile := filepath.Join(dir, "ran.log")
	for i, r := range replicas[:2] {
		s.RunAgent(t, "failover-agent-"+strconv.Itoa(i), r.URL)
	}
	var jobs []string
	for i := range 3 {
		job := e2ekit.EverySecond("failover-" + strconv.Itoa(i))
		job["executor"] = e2ekit.Shell(`echo "$AX_EXECUTION_ID" >> ` + ranFile)
		jobs = append(jobs, s.CreateJob(t, job))
	}
	waitFor(t, 5*time.Second)

	pgRun(t, "pg_ctl", "-D", primary, "-m", "immediate", "-w", "stop")
	pgRun(t, "pg_ctl", "-D", standby, "-w", "promote")
	promoted := time.Now()
	waitFor(t, 10*time.Second)

	newPrimary := e2ekit.OpenPool(t, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/ax", standbyPort))
	for _, id := range jobs {
		status, out := replicas[2].API(t, "POST", "/v1/jobs/"+id+"/pause", nil)
		require.Equal(t, 200, status, out)
	}
	require.Eventually(t, func() bool {
		var open int
		require.NoError(t, newPrimary.QueryRow(ctx,
			`SELECT count(*) FROM ax.task WHERE state IN ('pending', 'leased', 'running')`).Scan(&open))
		return open == 0
	}, 60*time.Second, 200*time.Millisecond, "no task is left pending, leased or running")

	var duplicateTicks int
	require.NoError(t, newPrimary.QueryRow(ctx, `SELECT count(*) FROM (SELECT 1 FROM ax.all_executions
		WHERE cause IN ('schedule', 'catch_up') GROUP BY job_id, scheduled_for HAVING count(*) > 1) d`).Scan(&duplicateTicks))
	require.Zero(t, duplicateTicks, "no tick fired twice")

	raw, err := os.ReadFile(ranFile)
	require.NoError(t, err)
	seen := map[string]int{}
	for _, id := range strings.Fields(string(raw)) {
		seen[id]++
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "execution %s ran %d times", id, n)
	}
	require.NotEmpty(t, seen)

	var firstAfter time.Time
	require.NoError(t, newPrimary.QueryRow(ctx, `SELECT min(fired_at) FROM ax.all_executions
		WHERE fired_at > $1`, promoted).Scan(&firstAfter))
	require.Less(t, firstAfter.Sub(promoted), 5*time.Second, "fires resume within 5 s of the promotion")
	t.Logf("runs: %d, first fire %s after the promotion", len(seen), firstAfter.Sub(promoted).Round(time.Millisecond))
}

// waitFor lets d of wall clock pass while the processes work.
func waitFor(t *testing.T, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	require.Eventually(t, func() bool { return time.Now().After(end) }, d+5*time.Second, 100*time.Millisecond)
}

// clusterDir is a directory the postgres user owns (Postgres refuses to
// run as root), removed when the test ends.
func clusterDir(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(pgBinDir, "initdb")); err != nil {
		t.Fatalf("no Postgres server binaries in %s: %v", pgBinDir, err)
	}
	dir, err := os.MkdirTemp("", "ax-failover-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	if cred := postgresCredential(t); cred != nil {
		require.NoError(t, os.Chown(dir, int(cred.Uid), int(cred.Gid)))
	}
	return dir
}

// postgresCredential is the postgres user's when running as root, else nil.
func postgresCredential(t *testing.T) *syscall.Credential {
	t.Helper()
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	require.NoError(t, err)
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
}

// pgRun runs one of the server binaries as the user that may run them.
func pgRun(t *testing.T, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(pgBinDir, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCredential(t)}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
}

func appendConf(t *testing.T, dataDir, file, conf string) {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dataDir, file), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(conf)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// startCluster starts dataDir and stops it (immediate) when the test ends.
func startCluster(t *testing.T, dataDir string) {
	t.Helper()
	pgRun(t, "pg_ctl", "-D", dataDir, "-l", filepath.Join(dataDir, "server.log"), "-w", "start")
	t.Cleanup(func() {
		cmd := exec.Command(filepath.Join(pgBinDir, "pg_ctl"), "-D", dataDir, "-m", "immediate", "-w", "stop")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: postgresCredential(t)}
		_ = cmd.Run() // already stopped by the test: nothing to do
	})
}

// waitSynchronous waits until the standby streams as the synchronous one.
func waitSynchronous(t *testing.T, url string) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	require.Eventually(t, func() bool {
		var n int
		err := conn.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_replication WHERE application_name = 'standby1' AND sync_state = 'sync'`).Scan(&n)
		return err == nil && n == 1
	}, 30*time.Second, 100*time.Millisecond, "the standby streams synchronously")
}

// freePort is a free loopback TCP port.
func freePort(t *testing.T) int {
	t.Helper()
	_, port, _ := strings.Cut(proctest.FreeAddr(t), ":")
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}
