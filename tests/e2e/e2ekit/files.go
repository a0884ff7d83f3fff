package e2ekit

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TaskDir returns a folder for the marker files of tasks. A task's shell
// runs in a process group of its own, which an agent killed with SIGKILL
// leaves behind: commands write their group id to DIR/*.pid, and those
// groups are killed when the test ends, passed or failed.
func TaskDir(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() {
		files, _ := filepath.Glob(filepath.Join(dir, "*.pid"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
		}
	})
	return dir
}

// WaitFile waits for a file a task writes.
func WaitFile(t testing.TB, path string, timeout time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { _, err := os.Stat(path); return err == nil },
		timeout, 50*time.Millisecond, "%s appears", path)
}
