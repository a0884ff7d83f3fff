package pglocal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// sweep stops and removes the temp clusters of processes that died without
// calling Stop. pg_ctl detaches the server from the process that started it,
// so without the sweep every crashed or killed test run would leave a server
// running. tmpl gives the binaries and user to stop them with.
func sweep(ctx context.Context, tmpl *cluster) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), tempPrefix+"*")) // the only error is a bad pattern
	for _, dir := range dirs {
		if !abandoned(dir) {
			continue
		}
		old := &cluster{dir: dir, bin: tmpl.bin, cred: tmpl.cred, logger: tmpl.logger}
		tmpl.logger.InfoContext(ctx, "cleaning up PostgreSQL cluster of a crashed run", "dir", dir)
		if err := errors.Join(old.stop(stopImmediate), old.remove(true)); err != nil {
			tmpl.logger.WarnContext(ctx, "error cleaning up PostgreSQL cluster of a crashed run", "dir", dir, "error", err)
		}
	}
}

// abandoned reports whether the process that made the temp folder dir is
// gone. Folders without an owner file are being made, or kept on purpose.
func abandoned(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, ownerFile))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return false
	}
	// Signal 0 checks the process exists; EPERM means it does, as another user's.
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
