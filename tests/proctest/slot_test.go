package proctest

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSlotsAreHeldUntilReleased(t *testing.T) {
	dir := t.TempDir()
	a, err := holdSlot(dir, 2, time.Second)
	require.NoError(t, err)
	require.NotNil(t, a)
	b, err := holdSlot(dir, 2, time.Second)
	require.NoError(t, err)
	require.NotNil(t, b)

	start := time.Now()
	c, err := holdSlot(dir, 2, 300*time.Millisecond)
	require.NoError(t, err)
	require.Nil(t, c, "both slots are held")
	require.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond, "it waited first")

	got := make(chan error, 1)
	go func() {
		f, err := holdSlot(dir, 2, 10*time.Second)
		if err == nil && f == nil {
			err = errors.New("no slot came free")
		}
		releaseSlot(f)
		got <- err
	}()
	time.Sleep(200 * time.Millisecond)
	releaseSlot(a)
	require.NoError(t, <-got, "a released slot is taken by the waiter")
	releaseSlot(b)
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
	kill := func() { _ = syscall.Kill(-holder.Process.Pid, syscall.SIGKILL); _ = holder.Wait() }
	t.Cleanup(kill) // flock and its sleep, by process group
	require.Eventually(t, func() bool {
		f, err := holdSlot(dir, 1, 0)
		require.NoError(t, err)
		releaseSlot(f)
		return f == nil
	}, 5*time.Second, 20*time.Millisecond, "the other process holds slot 0")

	kill()
	f, err := holdSlot(dir, 1, 5*time.Second)
	require.NoError(t, err)
	require.NotNil(t, f, "its slot went with it")
	releaseSlot(f)
}
