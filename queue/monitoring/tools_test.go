package monitoring_test

import (
	"os"
	"os/exec"
	"testing"
)

// requireTool finds a Prometheus tool (promtool, amtool) on PATH. Missing,
// the test is skipped on a developer's machine and fails in CI (CI set),
// where .ci/run installs Debian's prometheus and prometheus-alertmanager.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	const install = "apt-get install prometheus prometheus-alertmanager (Debian, Ubuntu)"
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not on PATH and CI is set: the alerting checks must run in CI; %s", name, install)
	}
	t.Skipf("SKIP: %s is not on PATH, so the alerting configuration is not checked; %s (with CI set this fails)", name, install)
	return ""
}
