package outbound_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/ax-scheduler/ax/queue/outbound"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeResolver maps names to addresses without touching real DNS; a name
// it does not know does not resolve. Each name's answers are used in turn,
// the last one repeating, so a test can play a name that changes address.
type fakeResolver struct {
	mu      sync.Mutex
	answers map[string][][]string
	calls   map[string]int
}

func newResolver(hosts map[string][]string) *fakeResolver {
	r := &fakeResolver{answers: map[string][][]string{}, calls: map[string]int{}}
	for host, addrs := range hosts {
		r.answers[host] = [][]string{addrs}
	}
	return r
}

// then adds a later answer for host.
func (r *fakeResolver) then(host string, addrs ...string) *fakeResolver {
	r.answers[host] = append(r.answers[host], addrs)
	return r
}

func (r *fakeResolver) LookupIPAddr(_ context.Context, host string) ([]net.IPAddr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	answers, ok := r.answers[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	answer := answers[min(r.calls[host], len(answers)-1)]
	r.calls[host]++
	out := make([]net.IPAddr, len(answer))
	for i, a := range answer {
		out[i] = net.IPAddr{IP: net.ParseIP(a)}
	}
	return out, nil
}

func (r *fakeResolver) lookups(host string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[host]
}

// target is a loopback HTTP server that counts its requests.
type target struct {
	*httptest.Server
	hits atomic.Int64
	host atomic.Value // the last Host header
}

func newTarget(t *testing.T, h http.HandlerFunc) *target {
	t.Helper()
	tg := &target{}
	if h == nil {
		h = func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }
	}
	tg.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tg.hits.Add(1)
		tg.host.Store(r.Host)
		h(w, r)
	}))
	t.Cleanup(tg.Close)
	return tg
}

// port is the target's port, to build URLs with other host names.
func (tg *target) port() string {
	_, port, _ := net.SplitHostPort(tg.Listener.Addr().String())
	return port
}

// client returns a client for p whose idle connections close with t.
func client(t *testing.T, p outbound.Policy) *http.Client {
	t.Helper()
	c, err := outbound.NewClient(p)
	require.NoError(t, err)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// get sends a GET to url and returns the response, its body read.
func get(t *testing.T, c *http.Client, url string) (*http.Response, []byte, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := c.Do(req)
	if err != nil {
		return resp, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp, body, err
}
