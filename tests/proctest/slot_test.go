package proctest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// one takes one of total slots in dir, waiting up to wait (nil: none).
func one(t *testing.T, dir string, total int, wait time.Duration) *os.File {
	t.Helper()
	files, err := holdSlots(dir, total, 1, wait)
	require.NoError(t, err)
	if files == nil {
		return nil
	}
	return files[0]
}

func TestSlotsAreHeldUntilReleased(t *testing.T) {
	dir := t.TempDir()
	a := one(t, dir, 2, time.Second)
	require.NotNil(t, a)
	b := one(t, dir, 2, time.Second)
	require.NotNil(t, b)

	start := time.Now()
	require.Nil(t, one(t, dir, 2, 300*time.Millisecond), "both slots are held")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "it waited first")

	got := make(chan error, 1)
	go func() {
		files, err := holdSlots(dir, 2, 1, 10*time.Second)
		if err == nil && files == nil {
			err = errors.New("no slot came free")
		}
		for _, f := range files {
			releaseSlot(f)
		}
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	releaseSlot(a)
	require.NoError(t, <-got, "a released slot is taken by the waiter")
	releaseSlot(b)
}

// A test's reservation takes its slots all at once or none: with one of
// two held elsewhere, a reservation of two waits and then holds none, so
// the free one is still free; once both are free it takes both.
func TestSlotsAreReservedAllOrNone(t *testing.T) {
	dir := t.TempDir()
	a := one(t, dir, 2, time.Second)
	require.NotNil(t, a)
	files, err := holdSlots(dir, 2, 2, 300*time.Millisecond)
	require.NoError(t, err)
	require.Nil(t, files, "one of two is held elsewhere")
	b := one(t, dir, 2, 0)
	require.NotNil(t, b, "the reservation left the free one free")
	releaseSlot(a)
	releaseSlot(b)
	files, err = holdSlots(dir, 2, 2, time.Second)
	require.NoError(t, err)
	require.Len(t, files, 2)
	require.Nil(t, one(t, dir, 2, 0))
	for _, f := range files {
		releaseSlot(f)
	}
}

// Another process's lock counts too (the test binaries of a run share the
// slots), and goes when that process dies.
func TestASlotHeldByAnotherProcessGoesWithIt(t *testing.T) {
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("flock(1) is not installed")
	}
	dir := t.TempDir()
	// --close: the lock stays with flock itself, not its sleeping child.
	holder := exec.Command(flock, "--exclusive", "--close", dir+"/0", "sleep", "60")
	holder.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, holder.Start())
	var once sync.Once
	kill := func() { // flock and its sleep, by process group, once
		once.Do(func() { _ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); _ = holder.Wait() })
	}
	t.Cleanup(kill)
	deadline := time.Now().Add(5 * time.Second)
	for {
		f := one(t, dir, 1, 0)
		if f == nil {
			break // the other process holds slot 0
		}
		releaseSlot(f)
		require.True(t, time.Now().Before(deadline), "flock took the slot")
		time.Sleep(20 * time.Millisecond)
	}

	kill()
	f := one(t, dir, 1, 5*time.Second)
	require.NotNil(t, f, "its slot went with it")
	releaseSlot(f)
}

// oneSlotAndAStandIn gives t a run of one server slot in a folder of its
// own, and a stand-in `ax` that waits (it runs whatever its arguments).
func oneSlotAndAStandIn(t *testing.T) (dir, bin string) {
	t.Helper()
	dir = t.TempDir()
	t.Setenv("AX_TEST_SERVER_SLOT_DIR", dir)
	t.Setenv("AX_TEST_SERVER_SLOTS", "1")
	bin = filepath.Join(t.TempDir(), "ax")
	require.NoError(t, os.WriteFile(bin, []byte("#!/bin/sh\nexec sleep 30\n"), 0o700))
	return dir, bin
}

// An `ax serve` holds its slot itself, so the slot goes when it exits and
// not before, even if the test binary that started it dies first: this
// process keeps no descriptor of it.
func TestAServerHoldsItsOwnSlot(t *testing.T) {
	dir, bin := oneSlotAndAStandIn(t)
	p := Start(t, bin, nil, "serve")
	require.Nil(t, one(t, dir, 1, 0), "the server holds the slot")
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	for _, fd := range fds {
		target, _ := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		require.NotEqual(t, filepath.Join(dir, "0"), target, "this process keeps no descriptor of it")
	}
	p.Signal(syscall.SIGKILL)
	require.Error(t, p.Wait(10*time.Second))
	f := one(t, dir, 1, 5*time.Second)
	require.NotNil(t, f, "its exit freed the slot")
	releaseSlot(f)

	Start(t, bin, nil, "version") // not a server: no slot (stopped when the test ends)
	f = one(t, dir, 1, 0)
	require.NotNil(t, f, "another command takes no slot")
	releaseSlot(f)
}

// A test that reserved its slots starts its servers at once, on them:
// with the only slot reserved, a server that waited for one of its own
// would wait slotWait (2 minutes) and start without.
func TestAReservingTestsServersStartAtOnce(t *testing.T) {
	dir, bin := oneSlotAndAStandIn(t)
	ReserveServers(t, 1)
	require.Nil(t, one(t, dir, 1, 0), "the test holds the slot")
	start := time.Now()
	for range 2 {
		require.True(t, Start(t, bin, nil, "serve").Running())
	}
	require.Less(t, time.Since(start), 10*time.Second, "no server waited for a slot")
}
