package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/proctest"
)

// sdk is one agent implementation under test: prepare finds its runtime
// and builds its fixture once, and says how to start it.
type sdk struct {
	name    string
	prepare func(t testing.TB) fixture
}

// fixture is how to start an SDK's fixture program: cmd with args, and
// env added to the suite's variables.
type fixture struct {
	sdk  string
	cmd  string
	args []string
	env  []string
}

// sdks are the implementations every case runs against.
var sdks = []sdk{
	{name: "go", prepare: prepareGo},
	{name: "ts", prepare: prepareTS},
	{name: "python", prepare: preparePython},
}

// start runs the fixture as agent name with labels (k=v,…) and key (a
// fresh agent key when empty), plus extra environment.
func (f fixture) start(t testing.TB, s *server, name, labels, key string, env ...string) *proctest.Process {
	t.Helper()
	if key == "" {
		key = s.newKey(t, "--scope", "agent")
	}
	all := append([]string{"AX_SERVER=" + s.url, "AX_AGENT_KEY=" + key, "AX_AGENT_NAME=" + name, "AX_LABELS=" + labels,
		"AX_LEASE_WAIT=5"}, f.env...)
	return proctest.Start(t, f.cmd, append(all, env...), f.args...)
}

// once runs build one time per test process and remembers its answer.
type once struct {
	sync.Once
	fx  fixture
	err error
	// skip is set when the runtime is missing (not an error outside CI).
	skip string
}

func (o *once) get(t testing.TB, build func() (fixture, string, error)) fixture {
	t.Helper()
	o.Do(func() { o.fx, o.skip, o.err = build() })
	if o.skip != "" {
		missingRuntime(t, o.skip)
	}
	require.NoError(t, o.err)
	return o.fx
}

// missingRuntime skips the test on a developer's machine and fails it in
// CI (CI set), where every SDK must be checked.
func missingRuntime(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("%s and CI is set: every agent SDK must pass the conformance suite in CI", why)
	}
	t.Skipf("SKIP: %s (with CI set this fails)", why)
}

var goOnce, tsOnce, pyOnce once

// prepareGo builds the Go fixture, on the Go agent of this checkout.
func prepareGo(t testing.TB) fixture {
	return goOnce.get(t, func() (fixture, string, error) {
		dir, err := tempBuildDir("ax-conformance-go-")
		if err != nil {
			return fixture{}, "", err
		}
		bin := filepath.Join(dir, "go-fixture")
		out, err := run(repoRoot(), "go", "build", "-o", bin, "./tests/conformance/testdata/go-fixture")
		if err != nil {
			return fixture{}, "", wrap("go build", out, err)
		}
		return fixture{sdk: "go", cmd: bin}, "", nil
	})
}

// prepareTS type-checks and compiles the TypeScript SDK and its fixture:
// first the client it is built on (openapi/ts, into its dist folder, where
// the SDK's dependency finds it), then the SDK into a temporary folder.
func prepareTS(t testing.TB) fixture {
	return tsOnce.get(t, func() (fixture, string, error) {
		node, err := exec.LookPath("node")
		if err != nil {
			return fixture{}, "node is not on PATH; install Node.js 20 or later", nil
		}
		client := filepath.Join(repoRoot(), "openapi", "ts")
		sdkDir := filepath.Join(repoRoot(), "agent", "ts")
		for _, dir := range []string{client, sdkDir} {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", "typescript", "bin", "tsc")); err != nil {
				return fixture{}, dir + "/node_modules is missing; run make ts-deps", nil
			}
		}
		out, err := tsBuildDir(client, sdkDir)
		if err != nil {
			return fixture{}, "", err
		}
		fx := fixture{sdk: "ts", cmd: node, args: []string{filepath.Join(out, "test", "fixture.js")}}
		if exists(filepath.Join(out, "built")) && exists(filepath.Join(client, "dist", "index.js")) {
			return fx, "", nil // these sources were compiled before
		}
		tsc := func(dir, project string, args ...string) error {
			out, err := run(dir, node, append([]string{filepath.Join(dir, "node_modules", "typescript", "bin", "tsc"), "-p", project}, args...)...)
			return wrap("tsc -p "+project, out, err)
		}
		// The client as it is published: tsconfig.build.json, into dist/
		// (package.json's exports).
		if err := tsc(client, filepath.Join(client, "tsconfig.build.json")); err != nil {
			return fixture{}, "", err
		}
		if err := tsc(sdkDir, sdkDir, "--outDir", out, "--sourceMap", "false", "--declaration", "false"); err != nil {
			return fixture{}, "", err
		}
		if err := os.Symlink(filepath.Join(sdkDir, "node_modules"), filepath.Join(out, "node_modules")); err != nil && !os.IsExist(err) {
			return fixture{}, "", err
		}
		if err := os.WriteFile(filepath.Join(out, "package.json"), []byte(`{"type": "module"}`+"\n"), 0o644); err != nil {
			return fixture{}, "", err
		}
		return fx, "", os.WriteFile(filepath.Join(out, "built"), nil, 0o644)
	})
}

// tsBuildDir is where the compiled SDK and fixture go: a folder of the
// user's cache named after a hash of every source and config tsc reads
// (the client's and the SDK's), so an unchanged SDK is not compiled again
// (tsc type-checks the 6,000-line schema for tens of seconds of CPU); a
// temporary folder when there is no cache. The client's own dist folder,
// where the SDK's dependency link finds it at run time, is rebuilt with it.
func tsBuildDir(client, sdkDir string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return tempBuildDir("ax-conformance-ts-")
	}
	h := sha256.New()
	for _, root := range []string{filepath.Join(client, "src"), filepath.Join(client, "tsconfig.json"),
		filepath.Join(client, "package-lock.json"), filepath.Join(sdkDir, "src"), filepath.Join(sdkDir, "test"),
		filepath.Join(sdkDir, "tsconfig.json"), filepath.Join(sdkDir, "package-lock.json")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(path)
			fmt.Fprintf(h, "%s %d\n", path, len(b))
			h.Write(b)
			return err
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
	}
	dir := filepath.Join(cache, "ax-conformance-ts", hex.EncodeToString(h.Sum(nil)[:8]))
	return dir, os.MkdirAll(dir, 0o755)
}

// preparePython finds python3 (3.11 or later); the SDK needs nothing but
// the standard library, so its source folder is the whole install.
func preparePython(t testing.TB) fixture {
	return pyOnce.get(t, func() (fixture, string, error) {
		py, err := exec.LookPath("python3")
		if err != nil {
			return fixture{}, "python3 is not on PATH; install Python 3.11 or later", nil
		}
		if out, err := run(repoRoot(), py, "-c", "import sys; sys.exit(sys.version_info < (3, 11))"); err != nil {
			return fixture{}, "python3 is older than 3.11 " + string(out), nil
		}
		src := filepath.Join(repoRoot(), "agent", "python", "src")
		script := filepath.Join(repoRoot(), "tests", "conformance", "testdata", "fixture.py")
		return fixture{sdk: "python", cmd: py, args: []string{"-u", script},
			env: []string{"PYTHONPATH=" + src, "PYTHONDONTWRITEBYTECODE=1"}}, "", nil
	})
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func run(dir, name string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	return cmd.CombinedOutput()
}

func wrap(what string, out []byte, err error) error {
	if err == nil {
		return nil
	}
	return &buildError{what: what, out: strings.TrimSpace(string(out)), err: err}
}

type buildError struct {
	what, out string
	err       error
}

func (e *buildError) Error() string { return e.what + ": " + e.err.Error() + "\n" + e.out }
