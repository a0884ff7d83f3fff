//go:build unix

package agent

import "syscall"

// diskFree returns the bytes an unprivileged process may still write on
// the file system holding path; false when it cannot tell.
func diskFree(path string) (int64, bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, false
	}
	free := uint64(st.Bavail) * uint64(st.Bsize) //nolint:unconvert // field types differ by platform
	return int64(min(free, 1<<63-1)), true
}
