// Package importrules holds the test that keeps ax's imports flowing one
// way (issue #37; the README's layout section states the same map).
package importrules

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/ax-scheduler/ax/"

// anything allows every import of the module.
const anything = "*"

// rules maps a package (a path, or a folder and what is below it when it
// ends in "/...") to the packages of the module its non-test files may
// import. A package takes the first rule that matches it; a package no
// rule matches fails the test, so a new folder gets a line here first.
// Imports inside a package's own folder ("openapi/..." importing
// openapi/client) are listed like any other.
var rules = []struct{ from, to string }{
	{"cmd/...", anything},
	{"tests/...", anything}, // test harnesses; nothing else may import them (below)
	{"queue/axtype", ""},    // the types package: imported by every layer, importing none
	{"openapi/...", "openapi/... queue queue/axtype queue/httptask"},
	{"agent/...", "agent/... openapi/client queue/axtype queue/httptask queue/webhook"},
	{"queue/...", "queue/... db queue/axtype routing"},
	{"db/...", "db/... migrations queue/axtype"},
	{"routing", ""},
	{"migrations", ""},
}

type pkg struct {
	ImportPath string
	Imports    []string // of the non-test files
}

// TestImportRules: every package of the module imports only what its rule
// allows, and no package outside cmd and tests imports cmd or tests.
func TestImportRules(t *testing.T) {
	t.Parallel()
	var broken []string
	for _, p := range listPackages(t) {
		from, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		allowed, ok := ruleFor(from)
		require.True(t, ok, "package %s has no import rule: add it to rules (and to the README's layout)", from)
		for _, imp := range p.Imports {
			to, ok := strings.CutPrefix(imp, module)
			if !ok || permitted(from, to, allowed) {
				continue
			}
			broken = append(broken, from+" -> "+to)
		}
	}
	require.Empty(t, broken, "imports outside the rules (see rules in %s)", "tests/importrules/importrules_test.go")
}

func permitted(from, to, allowed string) bool {
	if under(to, "cmd/...") || under(to, "tests/...") {
		return under(from, "cmd/...") || under(from, "tests/...")
	}
	if allowed == anything {
		return true
	}
	return slices.ContainsFunc(strings.Fields(allowed), func(a string) bool { return under(to, a) })
}

func ruleFor(path string) (string, bool) {
	for _, r := range rules {
		if under(path, r.from) {
			return r.to, true
		}
	}
	return "", false
}

// under reports whether path is pattern, or below it when pattern ends in
// "/...".
func under(path, pattern string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == dir || strings.HasPrefix(path, dir+"/")
	}
	return path == pattern
}

// listPackages is `go list -json ./...` of the module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-e", "-json=ImportPath,Imports", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.NotEmpty(t, pkgs)
	return pkgs
}
