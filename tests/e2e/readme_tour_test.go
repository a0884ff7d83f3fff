package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// readmePath is README.md of this checkout.
func readmePath() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "README.md")
}

// tourBlocks returns the ```sh blocks of the README's "Five-minute tour"
// section, in order, as written.
func tourBlocks(t *testing.T, readme string) []string {
	t.Helper()
	_, tour, ok := strings.Cut(readme, "\n## Five-minute tour\n")
	require.True(t, ok, "README.md has no section ## Five-minute tour")
	tour, _, _ = strings.Cut(tour, "\n## ")
	var blocks []string
	for _, m := range regexp.MustCompile("(?ms)^```sh\n(.*?)^```$").FindAllStringSubmatch(tour, -1) {
		blocks = append(blocks, m[1])
	}
	return blocks
}

// The README is a front page.
func TestReadmeFitsAScreen(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(readmePath())
	require.NoError(t, err)
	require.LessOrEqual(t, strings.Count(string(data), "\n"), 250, "README.md is at most 250 lines: move the rest to openapi/guide")
}

// TestReadmeTour runs the README's tour as a reader would: every sh block
// of its "Five-minute tour", verbatim and in order, in one bash (-e,
// pipefail) in a folder holding bin/ (ax, ax-agent, ax-receiver), against
// `ax dev` (what make run runs) on a fresh database of its own, on a free
// port. AX_SERVER and AX_API_KEY are the ones ax dev prints; RECEIVER is a
// free port for the callback receiver. The tour must create a job, run it
// on a real agent, show it succeeded with its output, receive its signed
// callback, get the explanations, and find the console.
func TestReadmeTour(t *testing.T) {
	t.Parallel()
	for _, tool := range []string{"bash", "curl", "jq"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not on PATH and CI is set: the README's tour needs it", tool)
			}
			t.Skipf("SKIP: %s is not on PATH, so the README's tour is not run (with CI set this fails)", tool)
		}
	}
	data, err := os.ReadFile(readmePath())
	require.NoError(t, err)
	blocks := tourBlocks(t, string(data))
	require.GreaterOrEqual(t, len(blocks), 5, "the tour's sh blocks")

	work := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(work, "bin"), 0o755))
	for _, name := range []string{"ax", "ax-agent", "ax-receiver"} {
		require.NoError(t, os.Symlink(proctest.Binary(t, name), filepath.Join(work, "bin", name)))
	}
	require.NoError(t, os.WriteFile(filepath.Join(work, "tour.sh"), []byte(strings.Join(blocks, "\n")), 0o644))

	dev := proctest.Start(t, proctest.Binary(t, "ax"),
		[]string{"DATABASE_URL=" + dbtest.NewURL(t), "AX_ADDR=127.0.0.1:0"}, "dev", "--dir", filepath.Join(work, ".ax"))
	exports := waitDevBanner(t, dev, 90*time.Second)

	bash, err := exec.LookPath("bash")
	require.NoError(t, err)
	env := append(exports, "RECEIVER="+proctest.FreeAddr(t))
	tour := proctest.Start(t, bash, env, "-c", `cd "$0" && exec bash -e -o pipefail tour.sh`, work)
	require.NoError(t, tour.Wait(3*time.Minute), "the tour's commands:\n%s\noutput:\n%s", strings.Join(blocks, "\n"), tour.Output())
	out := tour.Output()
	t.Logf("the tour printed:\n%s", out)

	require.Regexp(t, `(?m)^\S+\s+hello\s+tour\s+cron "0 0 8 \* \* \?" Asia/Shanghai`, out, "ax job list shows the job")
	require.Regexp(t, `(?m)^shard 0 \[stdout\] hello from `, out, "the run's logs are shown")
	require.Regexp(t, `(?m)^\S+\s+tour/hello\s+manual\s+succeeded\s`, out, "ax exec get shows the run succeeded")
	require.Regexp(t, `(?m)^verified callback \S+ \(sent [^)]+\): job tour/hello succeeded, sequence 1$`, out,
		"the signed callback arrived and verified")
	require.Regexp(t, `(?m)T08:00:00\+08:00 \(\S+\): upcoming$`, out, "why: 08:00 is the next tick")
	require.Regexp(t, `(?m)T20:00:00\+08:00 \(\S+\): not_a_tick$`, out, "why: 20:00 is not a tick")
	require.Contains(t, out, "console: HTTP 200")
}

// waitDevBanner waits for the `export AX_API_KEY=… AX_SERVER=…` line that
// `ax dev` prints once it serves and returns its two assignments.
func waitDevBanner(t *testing.T, dev *proctest.Process, timeout time.Duration) []string {
	t.Helper()
	line := regexp.MustCompile(`(?m)^\s*export (AX_API_KEY=\S+) (AX_SERVER=\S+)$`)
	deadline := time.Now().Add(timeout)
	for {
		if m := line.FindStringSubmatch(dev.Output()); m != nil {
			return []string{m[1], m[2]}
		}
		if !dev.Running() {
			t.Fatalf("ax dev ended before it served:\n%s", dev.Output())
		}
		if time.Now().After(deadline) {
			t.Fatalf("ax dev did not print its banner within %s:\n%s", timeout, dev.Output())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
