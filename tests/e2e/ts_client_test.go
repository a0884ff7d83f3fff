package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/tests/dbtest"
	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// TestTypeScriptClient: the TypeScript client generated from the spec
// (openapi/ts), type-checked by tsc and run by node against a real server
// and agent, creates a shell job with a callback to a receiver of its own,
// triggers it, waits for it to succeed, finds "hello" in its output and
// verifies the callback with standardwebhooks and the job's signing
// secret (openapi/ts/test/e2e.ts says how).
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	dir := tsClientDir(t)
	node := requireNode(t, dir)
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	s.RunAgent(t, "ts-agent", s.URL)
	s.AgentReady(t, "ts-agent")

	script := compileTS(t, node, dir)
	proc := proctest.Start(t, node, []string{"AX_SERVER=" + s.URL, "AX_API_KEY=" + s.Key}, script)
	// On failure proctest logs what node printed (the failed assertion).
	require.NoError(t, proc.Wait(2*time.Minute), "node %s", script)
	t.Logf("node %s: %s", filepath.Base(script), proc.Output())
}

// tsClientDir is openapi/ts in this checkout.
func tsClientDir(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "openapi", "ts")
}

// requireNode finds node on PATH and the client's npm packages (npm ci in
// openapi/ts; make test and .ci/run do it). Missing, the test is skipped
// on a developer's machine and fails in CI (CI set).
func requireNode(t *testing.T, dir string) string {
	t.Helper()
	const install = "install Node.js 20 or later, then run npm ci in openapi/ts"
	node, err := exec.LookPath("node")
	missing := "node is not on PATH"
	if err == nil {
		if _, err = os.Stat(filepath.Join(dir, "node_modules", "typescript", "bin", "tsc")); err == nil {
			return node
		}
		missing = "openapi/ts/node_modules is missing"
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s and CI is set: the TypeScript client must be checked in CI; %s", missing, install)
	}
	t.Skipf("SKIP: %s, so the TypeScript client is not checked; %s (with CI set this fails)", missing, install)
	return ""
}

// compileTS type-checks the client and its test program with tsc and
// writes the JavaScript to a temporary folder (removed after the test),
// whose node_modules links to the client's; it returns the test program.
func compileTS(t *testing.T, node, dir string) string {
	t.Helper()
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tsc := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"),
		"-p", filepath.Join(dir, "tsconfig.json"), "--outDir", out, "--sourceMap", "false", "--declaration", "false")
	msg, err := tsc.CombinedOutput()
	require.NoError(t, err, "tsc:\n%s", msg)
	require.NoError(t, os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(out, "node_modules")))
	require.NoError(t, os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`+"\n"), 0o644))
	return filepath.Join(out, "test", "e2e.js")
}

// TestTypeScriptExample runs openapi/ts/example.mjs as its README prints
// it (`node example.mjs`, importing the package by its name) from the
// package as npm would install it: its package.json, dist built by `npm
// run build`'s tsconfig, its node_modules. Against a real server and
// agent, the example's run succeeds, prints its output, and its callback
// verifies with verifyCallback.
func TestTypeScriptExample(t *testing.T) {
	t.Parallel()
	dir := tsClientDir(t)
	node := requireNode(t, dir)
	s := e2ekit.StartServerOn(t, dbtest.NewURL(t), "AX_OUTBOUND_ALLOW_LOOPBACK=true")
	s.RunAgent(t, "ts-example-agent", s.URL)
	s.AgentReady(t, "ts-example-agent")

	pkg := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tsc := exec.CommandContext(ctx, node, filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"),
		"-p", filepath.Join(dir, "tsconfig.build.json"), "--outDir", filepath.Join(pkg, "dist"))
	msg, err := tsc.CombinedOutput()
	require.NoError(t, err, "tsc:\n%s", msg)
	for _, name := range []string{"package.json", "example.mjs"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(pkg, name), data, 0o644))
	}
	require.NoError(t, os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(pkg, "node_modules")))

	proc := proctest.Start(t, node, []string{"AX_SERVER=" + s.URL, "AX_API_KEY=" + s.Key}, filepath.Join(pkg, "example.mjs"))
	require.NoError(t, proc.Wait(2*time.Minute), "node example.mjs")
	out := proc.Output()
	t.Logf("node example.mjs:\n%s", out)
	require.Regexp(t, `(?m)^run \S+: succeeded$`, out)
	require.Contains(t, out, "hello from the TypeScript example")
	require.Regexp(t, `(?m)^callback \S+ verified: examples/example-\d+ succeeded$`, out)
}

// TestTypeScriptPackageVersion: the client's npm version is the API's
// (openapi.SpecVersion), the version of the spec it is generated from.
func TestTypeScriptPackageVersion(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join(tsClientDir(t), "package.json"))
	require.NoError(t, err)
	var pkg struct {
		Name, Version string
		Private       bool
		Exports       map[string]any
	}
	require.NoError(t, json.Unmarshal(data, &pkg))
	require.Equal(t, openapi.SpecVersion, pkg.Version)
	require.False(t, pkg.Private, "the package is published")
	require.Contains(t, pkg.Exports, ".")
}
