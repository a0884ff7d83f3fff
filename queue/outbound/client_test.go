package outbound_test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/outbound"
)

func TestClientLoopbackPerPolicy(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)

	_, _, err := get(t, client(t, outbound.Policy{}), tg.URL)
	require.ErrorIs(t, err, outbound.ErrBlocked)
	require.ErrorContains(t, err, "127.0.0.1 is blocked: loopback address, allowed only with AllowLoopback")
	_, _, err = get(t, client(t, outbound.Policy{AllowPrivate: true}), tg.URL)
	require.ErrorIs(t, err, outbound.ErrBlocked, "private does not include loopback")
	require.Zero(t, tg.hits.Load(), "a blocked request never reaches the server")

	resp, body, err := get(t, client(t, outbound.Policy{AllowLoopback: true}), tg.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", string(body))
	require.EqualValues(t, 1, tg.hits.Load())
}

func TestClientBlocksNamesResolvingToBlockedAddresses(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	resolver := newResolver(map[string][]string{
		"private.test":     {"10.0.0.1"},
		"metadata.test":    {"169.254.169.254"},
		"metadata6.test":   {"fd00:ec2::254"},
		"mixed.test":       {"127.0.0.1", "10.0.0.1"},
		"mapped.test":      {"::ffff:169.254.169.254"},
		"nat64.test":       {"64:ff9b::a9fe:a9fe"},
		"localhost.test":   {"127.0.0.1"},
		"unspecified.test": {"0.0.0.0"},
	})
	tests := []struct {
		host   string
		policy outbound.Policy
		reason string
	}{
		{"private.test", outbound.Policy{AllowLoopback: true}, `"private.test" resolves to 10.0.0.1, which is blocked: private address, allowed only with AllowPrivate`},
		{"metadata.test", outbound.Policy{AllowLoopback: true, AllowPrivate: true}, "cloud metadata address, always blocked"},
		{"metadata6.test", outbound.Policy{AllowLoopback: true, AllowPrivate: true}, "fd00:ec2::254, which is blocked: cloud metadata address"},
		{"mixed.test", outbound.Policy{AllowLoopback: true}, "10.0.0.1, which is blocked: private address"},
		{"mapped.test", outbound.Policy{AllowLoopback: true, AllowPrivate: true}, "cloud metadata address"},
		{"nat64.test", outbound.Policy{AllowLoopback: true, AllowPrivate: true}, "cloud metadata address (169.254.169.254)"},
		{"localhost.test", outbound.Policy{AllowPrivate: true}, "loopback address"},
		{"unspecified.test", outbound.Policy{AllowLoopback: true, AllowPrivate: true}, "unspecified address"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			t.Parallel()
			tt.policy.Resolver = resolver
			_, _, err := get(t, client(t, tt.policy), "http://"+tt.host+":"+tg.port()+"/")
			require.ErrorIs(t, err, outbound.ErrBlocked)
			require.ErrorContains(t, err, tt.reason)
			var blocked *outbound.BlockedError
			require.ErrorAs(t, err, &blocked)
			require.Equal(t, tt.host, blocked.Host)
		})
	}
	require.Zero(t, tg.hits.Load())
}

// The client dials the address it checked: a name that a real resolver
// could not resolve reaches the loopback server through the test resolver,
// looked up once per connection, and keeps its Host header.
func TestClientDialsTheCheckedAddress(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	resolver := newResolver(map[string][]string{"receiver.test": {"127.0.0.1"}})
	c := client(t, outbound.Policy{AllowLoopback: true, Resolver: resolver})

	url := "http://receiver.test:" + tg.port() + "/hook"
	resp, body, err := get(t, c, url)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "ok", string(body))
	require.Equal(t, "receiver.test:"+tg.port(), tg.host.Load())
	require.Equal(t, 1, resolver.lookups("receiver.test"))
}

// A name that resolves to an allowed address when the URL is validated and
// to the metadata service later (DNS rebinding) is caught at the
// connection.
func TestClientChecksAtEveryConnection(t *testing.T) {
	t.Parallel()
	tg := newTarget(t, nil)
	resolver := newResolver(map[string][]string{"rebind.test": {"127.0.0.1"}}).
		then("rebind.test", "169.254.169.254")
	p := outbound.Policy{AllowLoopback: true, Resolver: resolver}

	_, err := p.ValidateURL(t.Context(), "http://rebind.test:"+tg.port()+"/")
	require.NoError(t, err)

	_, _, err = get(t, client(t, p), "http://rebind.test:"+tg.port()+"/")
	require.ErrorIs(t, err, outbound.ErrBlocked)
	require.ErrorContains(t, err, "169.254.169.254, which is blocked: cloud metadata address")
	require.Zero(t, tg.hits.Load())
}

func TestClientRefusesRedirects(t *testing.T) {
	t.Parallel()
	next := newTarget(t, nil)
	tests := []struct {
		name     string
		status   int
		location string
	}{
		{"to the metadata service", http.StatusFound, "http://169.254.169.254/latest/meta-data/"},
		{"to a private address", http.StatusTemporaryRedirect, "http://10.0.0.1/admin"},
		{"to an allowed server", http.StatusMovedPermanently, next.URL + "/moved"},
		{"relative", http.StatusSeeOther, "/elsewhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, tt.location, tt.status)
			})
			resp, _, err := get(t, client(t, outbound.Policy{AllowLoopback: true}), tg.URL+"/hook")
			require.ErrorIs(t, err, outbound.ErrRedirect)
			require.ErrorContains(t, err, "redirects are refused")
			require.NotNil(t, resp, "the redirect response is returned for the record")
			require.Equal(t, tt.status, resp.StatusCode)
			require.EqualValues(t, 1, tg.hits.Load())
		})
	}
	t.Cleanup(func() { require.Zero(t, next.hits.Load(), "a redirect is never followed") })
}

func TestClientCapsResponseBody(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		size    int
		limit   int64
		chunked bool
		wantErr bool
	}{
		{"under the limit", 1000, 1024, false, false},
		{"exactly the limit", 1024, 1024, false, false},
		{"one byte over", 1025, 1024, false, true},
		{"far over", 64 << 10, 1024, false, true},
		{"far over, chunked", 64 << 10, 1024, true, true},
		{"default limit, exactly", 1 << 20, 0, false, false},
		{"default limit, over", 1<<20 + 1, 0, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			payload := bytes.Repeat([]byte("x"), tt.size)
			tg := newTarget(t, func(w http.ResponseWriter, _ *http.Request) {
				if tt.chunked {
					w.(http.Flusher).Flush() // no Content-Length
				}
				_, _ = w.Write(payload)
			})
			resp, body, err := get(t, client(t, outbound.Policy{AllowLoopback: true, MaxResponseBytes: tt.limit}), tg.URL)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			limit := tt.limit
			if limit == 0 {
				limit = outbound.DefaultMaxResponseBytes
			}
			if !tt.wantErr {
				require.NoError(t, err)
				require.Len(t, body, tt.size)
				return
			}
			require.ErrorIs(t, err, outbound.ErrResponseTooLarge)
			require.ErrorContains(t, err, "response body too large: more than")
			require.Len(t, body, int(limit), "the bytes up to the limit are still read")
		})
	}
}

func TestClientTimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	start := time.Now()
	_, _, err := get(t, client(t, outbound.Policy{AllowLoopback: true, Timeout: 200 * time.Millisecond}), tg.URL)
	var netErr net.Error
	require.ErrorAs(t, err, &netErr)
	require.True(t, netErr.Timeout(), "%v", err)
	require.Less(t, time.Since(start), 5*time.Second)
}

// Environment proxies are ignored: through one, the check would see the
// proxy's address instead of the destination's.
func TestClientIgnoresProxyEnvironment(t *testing.T) {
	tg := newTarget(t, nil)
	proxy := newTarget(t, nil)
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	resolver := newResolver(map[string][]string{"receiver.test": {"127.0.0.1"}})
	_, _, err := get(t, client(t, outbound.Policy{AllowLoopback: true, Resolver: resolver}), "http://receiver.test:"+tg.port()+"/")
	require.NoError(t, err)
	require.EqualValues(t, 1, tg.hits.Load())
	require.Zero(t, proxy.hits.Load())
}

func TestClientPostsBody(t *testing.T) {
	t.Parallel()
	got := make(chan string, 1)
	tg := newTarget(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r.Header.Get("Idempotency-Key") + " " + string(b)
		w.WriteHeader(http.StatusAccepted)
	})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, tg.URL, strings.NewReader(`{"shard":1}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", "exec_1")
	resp, err := client(t, outbound.Policy{AllowLoopback: true}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.Equal(t, `exec_1 {"shard":1}`, <-got)
}

func TestNewClientRejectsNegativeSettings(t *testing.T) {
	t.Parallel()
	_, err := outbound.NewClient(outbound.Policy{Timeout: -time.Second})
	require.ErrorContains(t, err, "Timeout is -1s")
	_, err = outbound.NewClient(outbound.Policy{MaxResponseBytes: -1})
	require.ErrorContains(t, err, "MaxResponseBytes is -1")
}

func TestClientUnresolvableHost(t *testing.T) {
	t.Parallel()
	_, _, err := get(t, client(t, outbound.Policy{Resolver: newResolver(nil)}), "http://nowhere.test/")
	require.ErrorIs(t, err, outbound.ErrUnresolvable)
	var dnsErr *net.DNSError
	require.True(t, errors.As(err, &dnsErr), "the resolver's error is kept: %v", err)
}
