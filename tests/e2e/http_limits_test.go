package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/tests/e2e/e2ekit"
	"github.com/ax-scheduler/ax/tests/proctest"
)

// These tests attack a real `ax serve` process with bodies it must refuse
// and watch its memory in /proc: a replica must not read, let alone
// decode, what it is going to refuse.

const mib = 1 << 20

// memGrowthLimit is how much a replica's peak RSS may grow while it
// refuses 64 MiB bodies. Under the race detector (AX_PROCTEST_RACE=1) it
// is twice that: its shadow memory and the replica's background loops
// grew the peak by 12.3 MiB once in CI while refusing a 512 KiB-limited
// PATCH, which reads at most 512 KiB. Either bound is well below what
// reading one 64 MiB body would cost.
var memGrowthLimit = map[bool]int64{false: 12 * mib, true: 24 * mib}[os.Getenv("AX_PROCTEST_RACE") == "1"]

// procMem returns VmRSS and VmHWM (peak RSS) of pid in bytes.
func procMem(t *testing.T, pid int) (rss, hwm int64) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(raw), "\n") {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		require.NoError(t, err, line)
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	require.NotZero(t, hwm, "VmHWM of %d", pid)
	return rss, hwm
}

// resetPeakMem resets the peak RSS (VmHWM) of process pid to its RSS now
// (proc(5), /proc/pid/clear_refs) and returns that RSS.
func resetPeakMem(t *testing.T, pid int) int64 {
	t.Helper()
	require.NoError(t, os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0))
	_, hwm := procMem(t, pid)
	return hwm
}

// rawRequest sends a request over its own connection, its body from body
// (with Content-Length length, or chunked when length < 0), and returns
// the status of the answer as soon as there is one, whether or not the
// body was all sent. An error means no answer within wait.
func rawRequest(addr, method, path string, header map[string]string, body io.Reader, length int64, wait time.Duration) (int, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return 0, err
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, path, addr)
	for k, v := range header {
		fmt.Fprintf(&head, "%s: %s\r\n", k, v)
	}
	if length >= 0 {
		fmt.Fprintf(&head, "Content-Length: %d\r\n\r\n", length)
	} else {
		head.WriteString("Transfer-Encoding: chunked\r\n\r\n")
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := conn.Write(head.Bytes()); err != nil {
			return
		}
		if length >= 0 {
			_, _ = io.Copy(conn, body)
			return
		}
		cw := httputil.NewChunkedWriter(conn)
		if _, err := io.Copy(cw, body); err == nil {
			_ = cw.Close()
			_, _ = conn.Write([]byte("\r\n"))
		}
	}()
	defer wg.Wait()
	if s, ok := body.(interface{ stop() }); ok {
		defer s.stop()
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(wait))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// filler is n bytes of JSON text: an object whose "result" is an array of
// zeros (cheap to send, costly to decode), after prefix fields.
func filler(prefix string, n int64) io.Reader {
	head := `{` + prefix + `"result":[`
	count := (n - int64(len(head)) - 3) / 2
	return io.MultiReader(strings.NewReader(head), io.LimitReader(repeatReader("0,"), count*2), strings.NewReader("0]}"))
}

func fillerLen(prefix string, n int64) int64 {
	head := `{` + prefix + `"result":[`
	return int64(len(head)) + (n-int64(len(head))-3)/2*2 + 3
}

type repeatReader string

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = r[i%len(r)]
	}
	return len(p) - len(p)%len(r), nil
}

// stalled sends prefix and then nothing until the request is over.
func stalled(prefix string) io.Reader {
	return &stalledReader{prefix: strings.NewReader(prefix), done: make(chan struct{})}
}

type stalledReader struct {
	prefix *strings.Reader
	done   chan struct{}
	once   sync.Once
}

func (r *stalledReader) Read(p []byte) (int, error) {
	if r.prefix.Len() > 0 {
		return r.prefix.Read(p)
	}
	<-r.done
	return 0, io.EOF
}

func (r *stalledReader) stop() { r.once.Do(func() { close(r.done) }) }

// keyWithScope creates an API key with scope through the CLI.
func keyWithScope(t *testing.T, s *e2ekit.Server, scope string) string {
	t.Helper()
	cmd := exec.Command(proctest.Binary(t, "ax"), "key", "--server", s.URL, "--key", s.Key, "create", "--scope", scope)
	if s.CAFile != "" { // ax key talks to the API, over TLS here
		cmd.Env = append(os.Environ(), "SSL_CERT_FILE="+s.CAFile)
	}
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// addrOf is where s listens, host:port, for a raw request.
func addrOf(s *e2ekit.Server) string { return strings.TrimPrefix(s.URL, "http://") }

func TestPatchWithoutKeyIsRefusedBeforeItsBody(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	id := s.CreateJob(t, map[string]any{"name": "patched", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}})

	// The body never comes: only a server that answers before reading it
	// answers at all. (A Content-Length past the limit is 413 before the
	// key is even looked at.)
	for _, length := range []int64{100 << 10, -1} {
		began := time.Now()
		status, err := rawRequest(addrOf(s), "PATCH", "/v1/jobs/"+id,
			map[string]string{"Content-Type": "application/merge-patch+json"}, stalled(`{"owner":`), length, 3*time.Second)
		require.NoError(t, err, "PATCH without a key must be answered before its body arrives")
		require.Equal(t, http.StatusUnauthorized, status)
		require.Less(t, time.Since(began), 3*time.Second)
	}

	// A read key may not PATCH either, and learns it before sending.
	status, err := rawRequest(addrOf(s), "PATCH", "/v1/jobs/"+id,
		map[string]string{"Content-Type": "application/merge-patch+json", "Authorization": "Bearer " + keyWithScope(t, s, "read")},
		stalled(`{"owner":`), 100, 3*time.Second)
	require.NoError(t, err)
	require.Equal(t, http.StatusForbidden, status)
}

func TestLargeBodiesAreRefusedWithoutMemory(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	id := s.CreateJob(t, map[string]any{"name": "big", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	admin := map[string]string{"Authorization": "Bearer " + s.Key, "Content-Type": "application/json"}
	merge := map[string]string{"Authorization": "Bearer " + s.Key, "Content-Type": "application/merge-patch+json"}
	anon := map[string]string{"Content-Type": "application/json"}
	cases := []struct {
		name, method, path string
		header             map[string]string
		chunked            bool
		want               []int
	}{
		{"patch job", "PATCH", "/v1/jobs/" + id, merge, false, []int{413}},
		{"patch job chunked", "PATCH", "/v1/jobs/" + id, merge, true, []int{413}},
		{"patch job without key", "PATCH", "/v1/jobs/" + id, anon, true, []int{401}},
		{"create job", "POST", "/v1/jobs", admin, false, []int{413}},
		{"create job without key", "POST", "/v1/jobs", anon, true, []int{401}},
		{"complete http task", "POST", "/v1/tasks/" + uuid.NewString() + "/complete", anon, false, []int{413}},
		{"complete http task chunked", "POST", "/v1/tasks/" + uuid.NewString() + "/complete", anon, true, []int{413}},
		{"agent results", "POST", "/v1/agents/" + uuid.NewString() + "/complete", admin, false, []int{413}},
		{"agent lease", "POST", "/v1/agents/" + uuid.NewString() + "/lease", admin, false, []int{413}},
		{"agent logs without key", "POST", "/v1/agents/" + uuid.NewString() + "/logs", anon, true, []int{401}},
	}
	// Warm up every path with a small body, so that what grows later is
	// the big bodies' doing.
	for _, c := range cases {
		_, err := rawRequest(addrOf(s), c.method, c.path, c.header, strings.NewReader("{}"), 2, 5*time.Second)
		require.NoError(t, err, c.name)
	}
	for _, c := range cases {
		length := int64(64 * mib)
		if c.chunked {
			length = -1
		}
		// Each case's own peak: counted from the cases before, the server's
		// other work (the race detector's shadow memory of its heap)
		// added up to more than one case may use.
		before := resetPeakMem(t, s.Proc.PID())
		status, err := rawRequest(addrOf(s), c.method, c.path, c.header, io.LimitReader(repeatReader("x"), 64*mib), length, 10*time.Second)
		_, hwm := procMem(t, s.Proc.PID())
		require.Less(t, hwm-before, memGrowthLimit, "%s: peak RSS grew by %d MiB", c.name, (hwm-before)/mib)
		require.NoError(t, err, c.name)
		require.Contains(t, c.want, status, c.name)
	}
}

func TestSlowBodyIsCutOff(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	id := s.CreateJob(t, map[string]any{"name": "slow", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	// One byte every 500 ms of a 1000-byte body: it would take 8 minutes.
	trickle := func() io.Reader { return &slowReader{every: 500 * time.Millisecond, done: make(chan struct{})} }
	var wg sync.WaitGroup
	for _, c := range []struct{ method, path, ct string }{
		{"PATCH", "/v1/jobs/" + id, "application/merge-patch+json"},
		{"POST", "/v1/jobs", "application/json"},
	} {
		wg.Go(func() {
			began := time.Now()
			status, err := rawRequest(addrOf(s), c.method, c.path,
				map[string]string{"Authorization": "Bearer " + s.Key, "Content-Type": c.ct}, trickle(), 1000, 9*time.Second)
			if err == nil {
				assert.Equal(t, http.StatusRequestTimeout, status, c.method+" "+c.path)
			} else {
				assert.Regexp(t, "EOF|reset", err.Error(), "%s %s: the server must cut a slow body off", c.method, c.path)
			}
			assert.Less(t, time.Since(began), 9*time.Second)
			t.Logf("%s %s: cut off after %s", c.method, c.path, time.Since(began).Round(time.Millisecond))
		})
	}
	wg.Wait()
}

// slowReader gives one byte per period until stopped.
type slowReader struct {
	every time.Duration
	done  chan struct{}
	once  sync.Once
}

func (r *slowReader) Read(p []byte) (int, error) {
	select {
	case <-r.done:
		return 0, io.EOF
	case <-time.After(r.every):
	}
	p[0] = ' '
	return 1, nil
}

func (r *slowReader) stop() { r.once.Do(func() { close(r.done) }) }

func TestJSONPatchCopyBomb(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	id := s.CreateJob(t, map[string]any{"name": "bomb", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	// 1 KiB, then each copy doubles it: 14 copies make 16 MiB.
	ops := []map[string]any{{"op": "add", "path": "/b", "value": []any{strings.Repeat("y", 1024)}}}
	for range 14 {
		ops = append(ops, map[string]any{"op": "copy", "from": "/b", "path": "/b/-"})
	}
	bomb, err := json.Marshal(ops)
	require.NoError(t, err)
	patch := func(key string, body []byte) int {
		status, err := rawRequest(addrOf(s), "PATCH", "/v1/jobs/"+id,
			map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json-patch+json"},
			bytes.NewReader(body), int64(len(body)), 20*time.Second)
		require.NoError(t, err)
		return status
	}
	read := keyWithScope(t, s, "read")
	patch(read, []byte(`[]`)) // warm the path up
	before := resetPeakMem(t, s.Proc.PID())

	status := patch(read, bomb)
	_, hwm := procMem(t, s.Proc.PID())
	require.Less(t, hwm-before, memGrowthLimit, "read key: peak RSS grew by %d MiB", (hwm-before)/mib)
	require.Equal(t, http.StatusForbidden, status, "a read key may not patch")

	before = resetPeakMem(t, s.Proc.PID())
	status = patch(s.Key, bomb)
	_, hwm = procMem(t, s.Proc.PID())
	require.Less(t, hwm-before, memGrowthLimit, "admin key: peak RSS grew by %d MiB", (hwm-before)/mib)
	require.Equal(t, http.StatusRequestEntityTooLarge, status, "copies stop at the job size limit")

	// A patch within the limits still works.
	require.Equal(t, http.StatusOK, patch(s.Key, []byte(`[{"op":"add","path":"/owner","value":"ops"}]`)))
	status, job := s.API(t, "GET", "/v1/jobs/"+id, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ops", job["owner"])
}

// TestShorthandPatchIndexBomb: the shorthand library grows an array to
// any index it is given, so a 20-byte patch asked for 64 GB and the
// server was killed; an index before an array's start panicked. Both
// are 422s that cost nothing, and an index in range still patches.
func TestShorthandPatchIndexBomb(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	id := s.CreateJob(t, map[string]any{"name": "index-bomb", "trigger": map[string]any{"kind": "manual"},
		"executor": map[string]any{"kind": "shell", "command": "true"}})
	patch := func(body string) int {
		status, err := rawRequest(addrOf(s), "PATCH", "/v1/jobs/"+id,
			map[string]string{"Authorization": "Bearer " + s.Key, "Content-Type": "application/merge-patch+shorthand"},
			strings.NewReader(body), int64(len(body)), 20*time.Second)
		require.NoError(t, err, body)
		return status
	}
	status, _ := s.API(t, "POST", "/v1/calendars", map[string]any{"name": "a", "entries": []any{map[string]any{"date": "2026-12-25"}}})
	require.Equal(t, http.StatusCreated, status)
	patch(`{owner: warm}`) // warm the path up
	for _, bomb := range []string{`{x[4000000000]: 1}`, `{x[50000000]: 1}`, `{exclude[^99999999]: a}`,
		`{x[99999999999999999999]: 1}`, `{x[-5]: 1}`, `{exclude[-3]: a}`} {
		before := resetPeakMem(t, s.Proc.PID())
		status := patch(bomb)
		_, hwm := procMem(t, s.Proc.PID())
		require.Less(t, hwm-before, memGrowthLimit, "%s: peak RSS grew by %d MiB", bomb, (hwm-before)/mib)
		require.Equal(t, http.StatusUnprocessableEntity, status, bomb)
	}
	require.Equal(t, http.StatusOK, patch(`{exclude[0]: a, owner: ops}`))
	status, job := s.API(t, "GET", "/v1/jobs/"+id, nil)
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "ops", job["owner"])
	require.Equal(t, []any{"a"}, job["exclude"])
}

func TestTaskCompletionChecksTokenBeforeBody(t *testing.T) {
	t.Parallel()
	s := e2ekit.StartServer(t)
	// Big bodies, in parallel, with no key: refused without decoding.
	before := resetPeakMem(t, s.Proc.PID())
	began := time.Now()
	prefix := `"token":"` + uuid.NewString() + `","state":"succeeded",`
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			status, err := rawRequest(addrOf(s), "POST", "/v1/tasks/"+uuid.NewString()+"/complete",
				map[string]string{"Content-Type": "application/json"}, filler(prefix, 4*mib), fillerLen(prefix, 4*mib), 20*time.Second)
			assert.NoError(t, err)
			assert.Equal(t, http.StatusRequestEntityTooLarge, status)
		})
	}
	wg.Wait()
	_, hwm := procMem(t, s.Proc.PID())
	t.Logf("big bodies refused after %s; peak RSS grew by %d KiB", time.Since(began).Round(time.Millisecond), (hwm-before)>>10)
	require.Less(t, hwm-before, memGrowthLimit, "peak RSS grew by %d MiB", (hwm-before)/mib)

	// A token that is not current gets its answer before the body is sent.
	began = time.Now()
	status, err := rawRequest(addrOf(s), "POST", "/v1/tasks/"+uuid.NewString()+"/complete",
		map[string]string{"Content-Type": "application/json", "Ax-Completion-Token": uuid.NewString()},
		stalled(`{"token":`), 100<<10, 3*time.Second)
	require.NoError(t, err, "a bad token must be refused before the body arrives")
	require.Equal(t, http.StatusNotFound, status)
	require.Less(t, time.Since(began), 3*time.Second)
}
