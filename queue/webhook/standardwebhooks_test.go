package webhook_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/webhook"
)

// npmPackages is the official Standard Webhooks library for JavaScript and
// its two dependencies, pinned so that the cross-check is reproducible.
var npmPackages = []string{"standardwebhooks@1.1.1", "@stablelib/base64@1.0.1", "fast-sha256@1.3.0"}

// interopScript verifies and signs with the npm package: it reads a JSON
// request on stdin and writes one JSON answer on stdout.
const interopScript = `
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

type interopVerify struct {
	Secret  string            `json:"secret"`
	Headers map[string]string `json:"headers"`
	Body    []byte            `json:"body"` // base64 in JSON
	name    string
	want    bool
}

type interopSign struct {
	Secret    string `json:"secret"`
	ID        string `json:"id"`
	Timestamp int64  `json:"timestamp"`
	Body      []byte `json:"body"`
}

type interopAnswer struct {
	Verify []struct {
		OK    bool   `json:"ok"`
		Error string `json:"error"`
	} `json:"verify"`
	Sign []string `json:"sign"`
}

// TestStandardWebhooksInterop checks our signatures against an
// implementation we did not write, both ways: the npm package must accept
// what Sign makes (and refuse tampered copies, so the check is not
// vacuous), and Verify must accept what the package signs.
func TestStandardWebhooksInterop(t *testing.T) {
	t.Parallel()
	modules := standardWebhooksModules(t)

	current, old, long := webhook.NewSecret(), webhook.NewSecret(), mustParse(t, "whsec_"+base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{0xa5}, 64)))
	now := time.Now()
	jsonBody := []byte(`{"execution_id":"0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b","state":"succeeded","result":{"rows":3}}`)
	unicodeBody := []byte(`{"result":"héllo ✓ 日本語","error":null}`)

	signed := func(id string, body []byte, secrets ...webhook.Secret) map[string]string {
		h := map[string]string{}
		sig, err := webhook.Signature(id, now, body, secrets...)
		require.NoError(t, err)
		h["webhook-id"], h["webhook-timestamp"], h["webhook-signature"] = id, strconv.FormatInt(now.Unix(), 10), sig
		return h
	}
	verify := []interopVerify{
		{name: "one secret", Secret: current.Text(), Headers: signed("0190a6c4-8c1e-7b3a-9f00-3c2d1e0f4a5b", jsonBody, current), Body: jsonBody, want: true},
		{name: "rotation, new secret", Secret: current.Text(), Headers: signed("exec_2", jsonBody, current, old), Body: jsonBody, want: true},
		{name: "rotation, old secret", Secret: old.Text(), Headers: signed("exec_2", jsonBody, current, old), Body: jsonBody, want: true},
		{name: "unicode body", Secret: current.Text(), Headers: signed("exec_3", unicodeBody, current), Body: unicodeBody, want: true},
		{name: "empty body", Secret: current.Text(), Headers: signed("exec_4", nil, current), Body: []byte{}, want: true},
		{name: "64-byte secret", Secret: long.Text(), Headers: signed("exec_5", jsonBody, long), Body: jsonBody, want: true},
		{name: "tampered body (control)", Secret: current.Text(), Headers: signed("exec_6", jsonBody, current), Body: unicodeBody, want: false},
		{name: "wrong secret (control)", Secret: old.Text(), Headers: signed("exec_7", jsonBody, current), Body: jsonBody, want: false},
	}
	sign := []interopSign{
		{Secret: current.Text(), ID: "exec_8", Timestamp: now.Unix(), Body: jsonBody},
		{Secret: current.Text(), ID: "exec_9", Timestamp: now.Unix(), Body: unicodeBody},
		{Secret: vectorSecret, ID: vectorID, Timestamp: vectorTimestamp, Body: []byte(vectorBody)},
	}

	answer := runInterop(t, modules, verify, sign)

	require.Len(t, answer.Verify, len(verify))
	for i, c := range verify {
		require.Equal(t, c.want, answer.Verify[i].OK, "standardwebhooks verify %q: %s", c.name, answer.Verify[i].Error)
	}
	require.Len(t, answer.Sign, len(sign))
	require.Equal(t, vectorSignature, answer.Sign[2], "the npm package reproduces the reference vector")
	for i, c := range sign[:2] {
		h := map[string][]string{
			"Webhook-Id": {c.ID}, "Webhook-Timestamp": {strconv.FormatInt(c.Timestamp, 10)}, "Webhook-Signature": {answer.Sign[i]},
		}
		_, err := webhook.Verify(h, c.Body, current)
		require.NoError(t, err, "our Verify of the npm package's signature %d", i)
		_, err = webhook.Verify(h, c.Body, old, current)
		require.NoError(t, err, "our Verify with two secrets, the right one second")
		_, err = webhook.Verify(h, append(c.Body, ' '), current)
		require.ErrorIs(t, err, webhook.ErrNoMatchingSignature)
	}
}

func runInterop(t *testing.T, modules string, verify []interopVerify, sign []interopSign) interopAnswer {
	t.Helper()
	script := filepath.Join(t.TempDir(), "interop.js")
	require.NoError(t, os.WriteFile(script, []byte(interopScript), 0o600))
	input, err := json.Marshal(map[string]any{"verify": verify, "sign": sign})
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Env = append(os.Environ(), "SW_MODULES="+modules)
	cmd.Stdin = bytes.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node: %s", stderr.String())

	var answer interopAnswer
	require.NoError(t, json.Unmarshal(out, &answer), "node wrote: %s", out)
	return answer
}

// standardWebhooksModules returns a node_modules folder holding
// npmPackages. It is installed once into the user's cache folder
// (~/.cache/ax-test/…, keyed by the package list) and reused by later runs;
// two test processes installing at once each install into their own folder
// and the first rename wins. The test is skipped when node or npm is missing
// or when npm cannot reach its registry; any other npm failure fails it.
func standardWebhooksModules(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: skipping the cross-check against the npm package standardwebhooks (install node 20+ and npm to run it)", tool)
		}
	}
	dir := npmCacheDir(t)
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(modules, "standardwebhooks", "package.json")); err == nil {
		return modules
	}
	require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
	tmp, err := os.MkdirTemp(filepath.Dir(dir), filepath.Base(dir)+".install-")
	require.NoError(t, err)
	defer os.RemoveAll(tmp)

	start := time.Now()
	npmInstall(t, tmp)
	t.Logf("installed %s with npm in %s into %s", strings.Join(npmPackages, " "), time.Since(start).Round(time.Millisecond), dir)
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, fs.ErrExist) {
		require.NoError(t, err) // fs.ErrExist: another test process installed first
	}
	return modules
}

// networkFailure recognises npm's errors for an unreachable registry.
var networkFailure = regexp.MustCompile(`(?i)E(NOTFOUND|AI_AGAIN|CONNREFUSED|CONNRESET|TIMEDOUT|NETUNREACH|HOSTUNREACH)|network|socket hang up|getaddrinfo`)

func npmInstall(t *testing.T, prefix string) {
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

// npmCacheDir is where the installed packages are kept between runs,
// named after a hash of npmPackages so that a version change installs anew.
func npmCacheDir(t *testing.T) string {
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

func mustParse(t *testing.T, s string) webhook.Secret {
	t.Helper()
	secret, err := webhook.ParseSecret(s)
	require.NoError(t, err)
	return secret
}
