// Package proctest builds ax's binaries once per test process and runs
// them as real processes that are always stopped (by PID) and cleaned up,
// also when a test fails.
package proctest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-scheduler/ax/tests/testlog"
)

var (
	buildOnce sync.Once
	binDir    string
	tempBin   bool // binDir is this process's own, removed by Cleanup
	buildErr  error
)

// Binary returns the path of cmd/<name> built for this test run.
func Binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(build)
	if buildErr != nil {
		t.Fatalf("proctest: %v", buildErr)
	}
	return filepath.Join(binDir, name)
}

// RaceBuilt says whether Binary builds the processes with the race
// detector (AX_PROCTEST_RACE=1, as CI does). Tests that bound a
// process's latency scale the bound then: the race detector makes a
// program 2 to 20 times slower (https://go.dev/doc/articles/race_detector,
// "Runtime Overhead").
func RaceBuilt() bool { return os.Getenv("AX_PROCTEST_RACE") == "1" }

// Cleanup removes the built binaries when they were built into a
// temporary folder; call it from TestMain after m.Run.
func Cleanup() {
	if tempBin {
		os.RemoveAll(binDir)
	}
}

func build() {
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
	// The processes' code runs under -race in the in-process tests
	// (openapi, queue…); building the binaries with it too makes every
	// end-to-end process several times slower, so it is opt-in: CI sets it.
	race := RaceBuilt()
	binDir, tempBin, buildErr = buildDir(root, race)
	if buildErr != nil {
		return
	}
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	if race {
		args = append(args, "-race")
	}
	// The agent program that declares jobs with the SDK, besides ax's own.
	cmd := exec.Command("go", append(args, "./cmd/...", "./tests/e2e/testdata/declaring-agent")...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		buildErr = fmt.Errorf("error building binaries: %v\n%s", err, out)
	}
}

// buildDir is where the binaries go: a folder of the user's cache kept
// from run to run, one per checkout and race setting, so go build skips
// the links (seconds of CPU that every end-to-end test waits for) when
// the code did not change; a temporary folder when there is no cache.
// go build replaces a binary by a new file, so a run still using the old
// one is not disturbed.
func buildDir(root string, race bool) (dir string, temp bool, err error) {
	cache, err := os.UserCacheDir()
	if err == nil {
		abs, _ := filepath.Abs(root)
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s race=%t", abs, race)))
		dir = filepath.Join(cache, "ax-proctest", hex.EncodeToString(sum[:6]))
		if err = os.MkdirAll(dir, 0o755); err == nil {
			return dir, false, nil
		}
	}
	dir, err = os.MkdirTemp("", "ax-bin-")
	return dir, true, err
}

// WidenParallel runs up to n tests at once unless -parallel was given;
// call it from TestMain. Tests of real processes mostly wait (for
// readiness, leases, heartbeats), so the default of one test per CPU
// leaves the machine idle. Fuzzing keeps the default, where -parallel
// counts fuzz workers.
func WidenParallel(n int) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" || f.Name == "test.fuzz" })
	if !given {
		_ = flag.Set("test.parallel", strconv.Itoa(n))
	}
}

// Process is a running binary.
type Process struct {
	t      testing.TB
	cmd    *exec.Cmd
	output *testlog.Buffer
	done   chan struct{}
	err    error
}

// Start runs bin with args and env (added to this process's environment)
// and stops it when the test ends. An `ax serve` first waits for one of
// the run's server slots (see serverSlots) and holds it until it exits,
// unless its test reserved its slots (ReserveServers).
func Start(t testing.TB, bin string, env []string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if _, reserved := reservations.Load(t); !reserved && filepath.Base(bin) == "ax" && len(args) > 0 && args[0] == "serve" {
		if slot := holdServerSlot(t); slot != nil {
			// The server holds the lock (an inherited descriptor it never
			// uses), this process closes its own: the slot goes when the
			// server exits, also when it outlives a killed test binary.
			cmd.ExtraFiles = []*os.File{slot}
			defer releaseSlot(slot)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("proctest: error starting %s: %v", bin, err)
	}
	p := &Process{t: t, cmd: cmd, output: out, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Signal(syscall.SIGKILL)
		<-p.done
		if t.Failed() {
			t.Logf("output of %s %s:\n%s", filepath.Base(bin), strings.Join(args, " "), p.Output())
		}
	})
	return p
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process group (children included).
func (p *Process) Signal(sig syscall.Signal) {
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Wait waits up to timeout for the process to exit and returns its error.
func (p *Process) Wait(timeout time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		return fmt.Errorf("process %d still running after %s", p.PID(), timeout)
	}
}

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Output is what the process printed so far.
func (p *Process) Output() string { return p.output.String() }

// FreeAddr returns a free loopback TCP address.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitServing waits until p, an `ax serve` started with AX_ADDR port 0,
// logs the address it listens on, and returns it. A port taken from
// FreeAddr can be taken by another test's process before the server binds
// it; then the other process answered this test's requests.
func WaitServing(t testing.TB, p *Process, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		for _, line := range strings.Split(p.Output(), "\n") {
			var entry struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "ax serving" && entry.Addr != "" {
				return entry.Addr
			}
		}
		if !p.Running() {
			t.Fatalf("proctest: the server ended before it was serving")
		}
		if time.Now().After(deadline) {
			t.Fatalf("proctest: the server was not serving within %s", timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitHTTP polls url until it answers 200 or timeout passes.
func WaitHTTP(t testing.TB, url string, timeout time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("proctest: %s did not answer 200 within %s (last error: %v)", url, timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// serverSlots is how many `ax serve` processes all the test binaries of a
// run keep at once (AX_TEST_SERVER_SLOTS to change it). Each holds about
// 8 connections (the engine's 5, the requests' 2, the notifier's), and
// the packages run at once (go test -p) started up to 11 of them: with
// the test binaries' own pools that ran a CI's Postgres (max_connections
// 100) out of connections, failing whichever test asked next. Seven hold
// about 56 and leave some 40 for the rest (the openapi tests alone were
// seen holding 34).
const serverSlots = 7

// slotWait is how long a server waits for a slot, or a reservation for
// its slots, before going on without: at worst the run is as it was
// before slots, never stuck (a test of several servers that reserved
// none takes them one by one, and a few such could each hold some and
// wait for the rest).
const slotWait = 2 * time.Minute

// reservations are the tests holding server slots of their own
// (ReserveServers): their servers start without waiting.
var reservations sync.Map // testing.TB → struct{}

// ReserveServers takes n of the run's server slots for t, all at once,
// and holds them until t ends; t's servers then start without waiting. A
// test that runs several servers calls it before its first: taking them
// one by one, a later server could wait for a slot in the middle of a
// step with a deadline (a webhook delivery held open while replicas
// start, a replica's restart), and tests holding some could each wait
// for the rest. After slotWait it goes on without them.
func ReserveServers(t testing.TB, n int) {
	t.Helper()
	total := slotCount()
	files, err := holdSlots(slotDir(), total, min(n, total), slotWait)
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	if files == nil {
		t.Logf("proctest: %d server slots of %d not free together after %s; going on without them", n, total, slotWait)
	}
	reservations.Store(t, struct{}{})
	t.Cleanup(func() { // after the servers' (cleanups run last first)
		reservations.Delete(t)
		for _, f := range files {
			releaseSlot(f)
		}
	})
}

// slotCount is how many server slots the run has: serverSlots, or
// AX_TEST_SERVER_SLOTS.
func slotCount() int {
	if v, err := strconv.Atoi(os.Getenv("AX_TEST_SERVER_SLOTS")); err == nil && v > 0 {
		return v
	}
	return serverSlots
}

// slotDir holds the slots' files, shared by every test process of the
// user's.
func slotDir() string {
	if dir := os.Getenv("AX_TEST_SERVER_SLOT_DIR"); dir != "" { // proctest's own tests
		return dir
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("ax-test-server-slots-%d", os.Getuid()))
}

// holdServerSlot takes one of the run's server slots. Nil: it waited
// slotWait and goes on without one.
func holdServerSlot(t testing.TB) *os.File {
	t.Helper()
	files, err := holdSlots(slotDir(), slotCount(), 1, slotWait)
	if err != nil {
		t.Fatalf("proctest: %v", err)
	}
	if files == nil {
		t.Logf("proctest: no server slot of %d free after %s; starting without one", slotCount(), slotWait)
		return nil
	}
	return files[0]
}

// holdSlots takes flocks on n of the total files in dir, all or none,
// waiting up to wait for them (nil, nil: they did not come free
// together). A lock goes when its process dies, so a killed test binary
// leaves none behind.
func holdSlots(dir string, total, n int, wait time.Duration) ([]*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(wait)
	for {
		var held []*os.File
		for i := 0; i < total && len(held) < n; i++ {
			f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_CREATE|os.O_RDWR, 0o600)
			if err != nil {
				for _, h := range held {
					releaseSlot(h)
				}
				return nil, err
			}
			if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
				held = append(held, f)
			} else {
				f.Close()
			}
		}
		if len(held) == n {
			return held, nil
		}
		for _, h := range held {
			releaseSlot(h)
		}
		if time.Now().After(deadline) {
			return nil, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// releaseSlot gives a slot back (closing the file drops its lock).
func releaseSlot(f *os.File) {
	if f != nil {
		f.Close()
	}
}
