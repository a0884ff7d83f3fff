package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/tests/dbtest"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat
// (what `getconf CLK_TCK` prints). The kernel reports these fields in
// USER_HZ whatever its own tick rate, and USER_HZ is 100 on every Linux
// architecture Go supports; reading it through sysconf would need cgo.
const clockTicks = 100

// cpuSampleEvery is how often a phase lists the database's backends and
// reads their CPU, so that a backend that exits mid-phase (a pool closing
// an idle connection, an autovacuum worker finishing) is counted up to its
// last sample rather than dropped. The pools the benchmarks open keep
// their connections (pgxpool's idle timeout is 30 minutes), so exits are
// rare; the sampling itself costs the process and Postgres well under a
// millisecond per round.
const cpuSampleEvery = 50 * time.Millisecond

// cpuUsage is the CPU (user + system) spent during a phase by this process
// and by the Postgres backends of the benchmark's database.
//
// walBytes is the WAL the whole server wrote meanwhile (its insert
// position at both ends): unlike CPU time, the same statements write the
// same WAL from run to run, so it shows a change in what a side writes
// that CPU's noise hides. Other databases' writes count too.
type cpuUsage struct {
	process    time.Duration
	backends   time.Duration
	autovacuum time.Duration // of backends, that of autovacuum workers
	walBytes   int64
}

func (u cpuUsage) total() time.Duration { return u.process + u.backends }

func (u cpuUsage) add(v cpuUsage) cpuUsage {
	return cpuUsage{process: u.process + v.process, backends: u.backends + v.backends,
		autovacuum: u.autovacuum + v.autovacuum, walBytes: u.walBytes + v.walBytes}
}

// cpuMeter measures cpuUsage of phases on one database. It lists the
// database's backends (pg_stat_activity, datname = the database) on a
// connection of its own, whose backend it leaves out, and reads their CPU
// from /proc, which works when Postgres runs on this machine in the same
// PID namespace. Otherwise (a remote DATABASE_URL) backends is false and
// the phases report the process's CPU only.
//
// Every backend of the database counts, whatever its application: the
// pools of both sides, the benchmark's own bookkeeping connections, and
// autovacuum workers on the database (they show its datname): vacuuming
// what a side wrote is a cost of that side's writes, though a worker
// started by one side's writes may run during the next side's phase.
type cpuMeter struct {
	mu       sync.Mutex // serializes phases on conn
	conn     *pgx.Conn
	self     int32 // conn's backend, not counted
	backends bool
}

// newCPUMeter connects a meter to the database at dbURL until tb ends.
func newCPUMeter(tb testing.TB, dbURL string) *cpuMeter {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	m := &cpuMeter{conn: conn}
	var addr *netip.Addr
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid(), inet_server_addr()").Scan(&m.self, &addr); err != nil {
		tb.Fatal(err)
	}
	// The server is local if it answered on a Unix socket (no address) or
	// on loopback, and its backend's PID here is a postgres process (not a
	// PID of another namespace, such as a container's, that happens to
	// exist here too).
	local := addr == nil || addr.IsLoopback()
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", m.self))
	m.backends = local && err == nil && string(bytes.TrimSpace(comm)) == "postgres"
	if _, _, err := procCPU(m.self); err != nil {
		m.backends = false
	}
	if !m.backends {
		tb.Logf("the CPU of Postgres backends is not readable here (server %v, /proc: %v): CPU figures are this process's only", addr, err)
	}
	return m
}

// backendKey tells processes apart even if a PID is reused within a
// phase: the process's start time (field 22 of /proc/PID/stat).
type backendKey struct {
	pid   int32
	start uint64
}

// cpuPhase is a phase being measured.
type cpuPhase struct {
	m       *cpuMeter
	process time.Duration
	wal     int64                 // the server's WAL insert position at the start
	first   map[backendKey]uint64 // ticks at the start, of backends alive then
	last    map[backendKey]uint64 // latest ticks of every backend seen
	vacuums map[backendKey]bool   // which of them are autovacuum workers
	err     error                 // first error of the sampler
	stop    chan struct{}
	done    chan struct{}
}

// start begins a phase: it reads the process's CPU and every backend's,
// then keeps sampling the backends until end. On a nil meter it measures
// nothing.
func (m *cpuMeter) start(tb testing.TB) *cpuPhase {
	tb.Helper()
	if m == nil {
		return nil
	}
	m.mu.Lock()
	p := &cpuPhase{m: m, first: map[backendKey]uint64{}, last: map[backendKey]uint64{},
		vacuums: map[backendKey]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	if m.backends {
		if err := p.sample(); err != nil {
			m.mu.Unlock()
			tb.Fatal(err)
		}
		for k, v := range p.last {
			p.first[k] = v
		}
	}
	var err error
	if p.wal, err = m.walPosition(); err != nil {
		m.mu.Unlock()
		tb.Fatal(err)
	}
	p.process = processCPU(tb)
	go p.run()
	return p
}

// walPosition reads the server's WAL insert position, in bytes.
func (m *cpuMeter) walPosition() (int64, error) {
	var at int64
	err := m.conn.QueryRow(context.Background(), "SELECT pg_current_wal_insert_lsn() - '0/0'::pg_lsn").Scan(&at)
	if err != nil {
		return 0, fmt.Errorf("error reading the WAL position: %w", err)
	}
	return at, nil
}

func (p *cpuPhase) run() {
	defer close(p.done)
	if !p.m.backends {
		return
	}
	tick := time.NewTicker(cpuSampleEvery)
	defer tick.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-tick.C:
			if err := p.sample(); err != nil && p.err == nil {
				p.err = err
			}
		}
	}
}

// end ends the phase and returns what it used: the process's CPU since
// start, and per backend its last ticks minus its ticks at the start (0
// for a backend that started during the phase). A nil phase used nothing.
func (p *cpuPhase) end(tb testing.TB) cpuUsage {
	tb.Helper()
	if p == nil {
		return cpuUsage{}
	}
	defer p.m.mu.Unlock()
	u := cpuUsage{process: processCPU(tb) - p.process}
	close(p.stop)
	<-p.done
	wal, err := p.m.walPosition()
	if err != nil {
		tb.Fatal(err)
	}
	u.walBytes = wal - p.wal
	if !p.m.backends {
		return u
	}
	if p.err == nil {
		p.err = p.sample()
	}
	if p.err != nil {
		tb.Fatal(p.err)
	}
	var ticks, vacuum uint64
	for k, v := range p.last {
		d := v - min(p.first[k], v)
		ticks += d
		if p.vacuums[k] {
			vacuum += d
		}
	}
	u.backends = time.Duration(ticks) * time.Second / clockTicks
	u.autovacuum = time.Duration(vacuum) * time.Second / clockTicks
	return u
}

// sample lists the backends of the database and records the CPU of those
// still alive.
func (p *cpuPhase) sample() error {
	type backend struct {
		PID    int32
		Vacuum bool
	}
	rows, err := p.m.conn.Query(context.Background(), `SELECT pid, backend_type = 'autovacuum worker'
		FROM pg_stat_activity WHERE datname = current_database() AND pid <> $1`, p.m.self)
	if err != nil {
		return fmt.Errorf("error listing backends: %w", err)
	}
	backends, err := pgx.CollectRows(rows, pgx.RowToStructByPos[backend])
	if err != nil {
		return fmt.Errorf("error listing backends: %w", err)
	}
	for _, be := range backends {
		ticks, start, err := procCPU(be.PID)
		if err != nil {
			continue // exited since the listing
		}
		k := backendKey{be.PID, start}
		p.last[k] = ticks
		p.vacuums[k] = be.Vacuum
	}
	return nil
}

// procCPU reads utime + stime (clock ticks) and the start time of process
// pid from /proc/PID/stat.
func procCPU(pid int32) (ticks, start uint64, err error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// Field 2, the command, is in parentheses and may hold spaces: the
	// fields after the last ')' start at field 3.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: no command field", pid)
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	var v [3]uint64
	for j, field := range []int{14, 15, 22} {
		if v[j], err = strconv.ParseUint(string(f[field-3]), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/stat field %d: %w", pid, field, err)
		}
	}
	return v[0] + v[1], v[2], nil
}

// processCPU is the user + system CPU this process has used.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestCPUMeter checks that the meter sees real work: a busy loop in this
// process raises the process's figure, and a query that keeps a backend
// of the database busy raises the backends' figure (and is not charged to
// the process).
func TestCPUMeter(t *testing.T) {
	dbURL := dbtest.NewURL(t)
	m := newCPUMeter(t, dbURL)
	if !m.backends {
		t.Fatal("the test's Postgres is local, but the meter cannot read its backends' CPU")
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	// A busy loop until its own thread has used 200 ms of CPU (however
	// long a loaded machine makes that take): the meter must count at least
	// that much for the process. CPU against CPU, not against wall time.
	p := m.start(t)
	spun := spinCPU(t, 200*time.Millisecond)
	busy := p.end(t)
	t.Logf("busy loop of %s thread CPU: %+v", spun, busy)
	if busy.process < spun {
		t.Errorf("a busy loop of %s thread CPU raised the process's CPU by %s", spun, busy.process)
	}

	p = m.start(t)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM generate_series(1, 5000000)").Scan(&n); err != nil {
		t.Fatal(err)
	}
	query := p.end(t)
	t.Logf("generate_series(1, 5e6): %+v", query)
	if n != 5_000_000 {
		t.Fatalf("count = %d", n)
	}
	// Counting 5e6 rows takes a backend several hundred ms of CPU; the
	// process only waits for the answer.
	if query.backends < 100*time.Millisecond {
		t.Errorf("counting 5e6 rows raised the backends' CPU by %s", query.backends)
	}
	if query.process >= query.backends {
		t.Errorf("waiting for a query cost the process %s, more than the backend's %s", query.process, query.backends)
	}

	// procCPU agrees with getrusage on this process.
	ticks, _, err := procCPU(int32(os.Getpid()))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := time.Duration(ticks)*time.Second/clockTicks, processCPU(t); got > want || got < want-100*time.Millisecond {
		t.Errorf("/proc/self/stat says %s of CPU, getrusage %s", got, want)
	}
}

// spinCPU busies the calling OS thread until it has used cpu of CPU time
// (RUSAGE_THREAD) and returns what it used; it gives up after a minute.
func spinCPU(t *testing.T, cpu time.Duration) time.Duration {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	threadCPU := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(rusageThread, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := threadCPU()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); {
		for range 100_000 {
		}
		if used := threadCPU() - start; used >= cpu {
			return used
		}
	}
	t.Fatalf("the busy loop got less than %s of CPU in a minute", cpu)
	return 0
}

// rusageThread is Linux's RUSAGE_THREAD: the calling thread's usage.
const rusageThread = 1
