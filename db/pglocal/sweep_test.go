package pglocal

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSweepAfterKill runs this test binary as a child that starts a cluster,
// SIGKILLs it as a crashed test run would be, and checks the sweep stops the
// server it left running and removes its folder. It is not parallel: a Find
// in another test would sweep the folder before the test looks at it.
func TestSweepAfterKill(t *testing.T) {
	if os.Getenv("AX_PGLOCAL_CRASHER") == "1" {
		startAndHang(t)
		return
	}

	child := exec.Command(os.Args[0], "-test.run=^TestSweepAfterKill$")
	child.Env = append(os.Environ(), "AX_PGLOCAL_CRASHER=1")
	child.Stderr = os.Stderr
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	// The child holds on until this pipe closes: the kill comes first, and
	// should this process die instead, the child's stdin ends with it.
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	t.Cleanup(func() { _ = stdin.Close() })
	require.NoError(t, child.Start())
	t.Cleanup(func() { _ = child.Process.Kill() }) // if the test fails before the kill
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.NoError(t, child.Process.Kill())
	_ = child.Wait() // "signal: killed"

	dir, url, _ := strings.Cut(strings.TrimSpace(line), " ")
	tmpl := templateCluster(t)
	t.Cleanup(func() { // in case the sweep fails
		leftover := &cluster{dir: dir, bin: tmpl.bin, cred: tmpl.cred, logger: tmpl.logger}
		assert.NoError(t, leftover.stop(stopImmediate))
		assert.NoError(t, os.RemoveAll(dir))
	})
	require.True(t, answers(t, url), "the killed process's server should outlive it")

	sweep(t.Context(), tmpl)
	require.NoDirExists(t, dir)
	require.False(t, answers(t, url), "port still answers after the sweep")
}

// startAndHang starts a cluster, reports where on stdout and waits to be
// killed: it reads stdin until its parent closes it, so it never outlives
// the parent.
func startAndHang(t *testing.T) {
	srv, err := Find(t.Context(), Options{SkipEnv: true, SkipLocal: true})
	require.NoError(t, err)
	os.Stdout.WriteString(srv.Dir + " " + srv.URL + "\n")
	_, _ = io.Copy(io.Discard, os.Stdin)
}

func TestSweepCleansCrashedTempCluster(t *testing.T) {
	t.Parallel()
	srv := find(t, Options{SkipEnv: true, SkipLocal: true})

	require.NoError(t, os.WriteFile(filepath.Join(srv.Dir, ownerFile), []byte(strconv.Itoa(deadPID(t))), 0o644))
	sweep(t.Context(), srv.cluster)
	require.NoDirExists(t, srv.Dir)
	require.False(t, answers(t, srv.URL), "port still answers after the sweep")
	require.NoError(t, srv.Stop(), "Stop after the folder is gone")
}

func TestSweepSparesLiveAndKeptClusters(t *testing.T) {
	t.Parallel()
	live := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(live, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644))
	dead := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dead, ownerFile), []byte(strconv.Itoa(deadPID(t))), 0o644))

	require.False(t, abandoned(live), "live owner")
	require.False(t, abandoned(t.TempDir()), "no owner file")
	require.True(t, abandoned(dead), "dead owner")
}

// templateCluster returns a cluster without a folder, with the binaries and
// user sweep needs.
func templateCluster(t *testing.T) *cluster {
	t.Helper()
	cred, err := serverCredential()
	require.NoError(t, err)
	return &cluster{bin: binDir(t), cred: cred, logger: testLogger(t)}
}
