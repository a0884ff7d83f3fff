// Package webhooktest checks Standard Webhooks requests against an
// implementation ax did not write: the official JavaScript library,
// standardwebhooks from the npm registry, run with node. It is for tests
// only: it installs npm packages, starts node, and fails or skips the test
// it is given.
//
// The packages are installed once into the user's cache folder
// (~/.cache/ax-test/…) and reused by later runs. A test using this package
// is skipped when node or npm is missing or when npm cannot reach its
// registry; any other failure of npm or node fails it.
package webhooktest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// npmPackages is the official Standard Webhooks library for JavaScript and
// its two dependencies, pinned so that the cross-check is reproducible.
var npmPackages = []string{"standardwebhooks@1.1.1", "@stablelib/base64@1.0.1", "fast-sha256@1.3.0"}

// VerifyRequest is a request for the package's Webhook.verify.
type VerifyRequest struct {
	// Secret is the receiver's secret, "whsec_…".
	Secret string
	// Header holds the request's headers; all of them are passed on.
	Header http.Header
	// Body is the raw body, exactly as received.
	Body []byte
}

// SignRequest is a message for the package's Webhook.sign.
type SignRequest struct {
	Secret    string
	ID        string
	Timestamp time.Time // sent in whole seconds
	Body      []byte
}

// Results is what the package answered, in the order of the requests.
type Results struct {
	// Verify holds nil for each request Webhook.verify accepted, and the
	// error it threw for the others.
	Verify []error
	// Sign holds the webhook-signature value Webhook.sign made for each
	// message.
	Sign []string
}

// VerifyWithStandardWebhooks fails t unless the npm package's
// Webhook.verify accepts the request: headers and the raw body as received,
// checked with secret. Like any receiver, the package refuses a
// webhook-timestamp more than five minutes from now.
func VerifyWithStandardWebhooks(t testing.TB, secret string, header http.Header, body []byte) {
	t.Helper()
	if err := StandardWebhooksError(t, secret, header, body); err != nil {
		t.Fatalf("the npm package standardwebhooks rejects the request: %v", err)
	}
}

// StandardWebhooksError returns the error the npm package's Webhook.verify
// throws for the request, or nil when it accepts it. Tests use it to show
// that a tampered request is refused.
func StandardWebhooksError(t testing.TB, secret string, header http.Header, body []byte) error {
	t.Helper()
	res := RunStandardWebhooks(t, []VerifyRequest{{Secret: secret, Header: header, Body: body}}, nil)
	return res.Verify[0]
}

// RunStandardWebhooks verifies and signs with the npm package, all in one
// node process.
func RunStandardWebhooks(t testing.TB, verify []VerifyRequest, sign []SignRequest) Results {
	t.Helper()
	modules := installModules(t)
	input, err := json.Marshal(scriptInput{Verify: toScriptVerify(verify), Sign: toScriptSign(sign)})
	if err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	var out scriptOutput
	if err := json.Unmarshal(runNode(t, modules, input), &out); err != nil {
		t.Fatalf("webhooktest: reading node's answer: %v", err)
	}
	if len(out.Verify) != len(verify) || len(out.Sign) != len(sign) {
		t.Fatalf("webhooktest: node answered %d verifications and %d signatures, want %d and %d",
			len(out.Verify), len(out.Sign), len(verify), len(sign))
	}
	return out.results()
}

// script verifies and signs with the npm package: it reads a scriptInput
// on stdin and writes a scriptOutput on stdout.
const script = `
const path = require("path");
const { Webhook } = require(path.join(process.env.SW_MODULES, "standardwebhooks"));
let input = "";
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  const req = JSON.parse(input);
  const out = { verify: [], sign: [] };
  for (const c of req.verify) {
    try {
      new Webhook(c.secret).verify(Buffer.from(c.body, "base64"), c.headers, { jsonParse: false });
      out.verify.push({ ok: true });
    } catch (e) {
      out.verify.push({ ok: false, error: String(e && e.message) });
    }
  }
  for (const c of req.sign) {
    out.sign.push(new Webhook(c.secret).sign(c.id, new Date(c.timestamp * 1000), Buffer.from(c.body, "base64")));
  }
  process.stdout.write(JSON.stringify(out));
});
`

type scriptInput struct {
	Verify []scriptVerify `json:"verify"`
	Sign   []scriptSign   `json:"sign"`
}

type scriptVerify struct {
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"` // base64 in JSON
}

type scriptSign struct {
	Secret    string `json:"secret"`
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"`
	Body      []byte `json:"body"`
}

type scriptOutput struct {
	Verify []struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"verify"`
	Sign []string `json:"sign"`
}

func toScriptVerify(reqs []VerifyRequest) []scriptVerify {
	out := make([]scriptVerify, len(reqs))
	for i, r := range reqs {
		out[i] = scriptVerify{Secret: r.Secret, Headers: nodeHeaders(r.Header), Body: nonNil(r.Body)}
	}
	return out
}

func toScriptSign(reqs []SignRequest) []scriptSign {
	out := make([]scriptSign, len(reqs))
	for i, r := range reqs {
		out[i] = scriptSign{Secret: r.Secret, ID: r.ID, Timestamp: r.Timestamp.Unix(), Body: nonNil(r.Body)}
	}
	return out
}

// nonNil makes a nil body empty, so that JSON carries "" and not null.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// nodeHeaders gives h the shape node's HTTP server hands a handler: names
// in lower case, repeated values joined with ", ".
func nodeHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for name, values := range h {
		out[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	return out
}

func (o scriptOutput) results() Results {
	res := Results{Verify: make([]error, len(o.Verify)), Sign: o.Sign}
	for i, v := range o.Verify {
		if !v.OK {
			res.Verify[i] = errors.New("standardwebhooks: " + v.Error)
		}
	}
	return res
}

// runNode runs script with node, input on stdin, and returns its stdout.
func runNode(t testing.TB, modules string, input []byte) []byte {
	t.Helper()
	file := filepath.Join(t.TempDir(), "standardwebhooks.js")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", file)
	cmd.Env = append(os.Environ(), "SW_MODULES="+modules)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("webhooktest: node: %v\n%s", err, stderr.String())
	}
	return out
}

// installModules returns a node_modules folder holding npmPackages,
// installed into the cache folder (keyed by the package list) on first use.
// Two test processes installing at once each install into their own folder
// and the first rename wins. It skips t when node or npm is missing or the
// registry is unreachable.
func installModules(t testing.TB) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: skipping the cross-check against the npm package standardwebhooks (install node 20+ and npm to run it)", tool)
		}
	}
	dir := cacheDir(t)
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "standardwebhooks", "package.json")); err == nil {
		return modules
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".install-")
	if err != nil {
		t.Fatalf("webhooktest: %v", err)
	}
	defer os.RemoveAll(tmp)

	start := time.Now()
	npmInstall(t, tmp)
	t.Logf("installed %s with npm in %s into %s", strings.Join(npmPackages, " "), time.Since(start).Round(time.Millisecond), dir)
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatalf("webhooktest: %v", err) // fs.ErrExist: another test process installed first
	}
	return modules
}

// networkFailure recognises npm's errors for an unreachable registry.
var networkFailure = regexp.MustCompile(`(?i)E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|NETUNREACH|HOSTUNREACH)|network|socket hang up|getaddrinfo`)

func npmInstall(t testing.TB, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	args := append([]string{"install", "--prefix", prefix, "--no-save", "--no-package-lock",
		"--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"}, npmPackages...)
	out, err := exec.CommandContext(ctx, "npm", args...).CombinedOutput()
	if err == nil {
		return
	}
	if networkFailure.Match(out) {
		t.Skipf("npm could not reach its registry, skipping the cross-check against standardwebhooks: %v\n%s", err, headLines(out, 6))
	}
	t.Fatalf("npm install %s: %v\n%s", strings.Join(npmPackages, " "), err, out)
}

// cacheDir is where the installed packages are kept between runs, named
// after a hash of npmPackages so that a version change installs anew.
func cacheDir(t testing.TB) string {
	sum := sha256.Sum256([]byte(strings.Join(npmPackages, "\n")))
	name := "standardwebhooks-" + hex.EncodeToString(sum[:6])
	base, err := os.UserCacheDir()
	if err != nil {
		t.Logf("no user cache folder (%v): installing for this run only", err)
		return filepath.Join(t.TempDir(), name)
	}
	return filepath.Join(base, "ax-test", name)
}

// headLines returns the first n lines of out, enough to name npm's error.
func headLines(out []byte, n int) string {
	lines := strings.SplitN(string(out), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
