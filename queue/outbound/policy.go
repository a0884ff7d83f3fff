// Package outbound makes the HTTP requests whose destination a user
// chooses — result callbacks and agentless HTTP jobs — without letting that
// user reach what sits next to ax (server-side request forgery): the cloud
// metadata service, link-local and, unless the operator allows them, private
// and loopback addresses.
//
// Checking a URL when it is saved is not enough: a name can resolve to a
// public address then and to a private one when the request is sent (DNS
// rebinding). So the client made by NewClient resolves each host itself,
// once per connection, checks every address it gets, and dials the checked
// address; a host with any blocked address is refused as a whole. It never
// goes through a proxy, does not follow redirects, and caps the response
// body. ValidateURL applies the same rules when a URL is submitted, so the
// API can refuse it with a reason.
package outbound

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/ax-scheduler/ax/queue/httptask"
)

// Errors of the package, returned wrapped with details; test them with
// errors.Is.
var (
	// ErrBlocked means a destination address is one the Policy forbids; the
	// error is a *BlockedError that says which address and why.
	ErrBlocked = errors.New("outbound: address blocked")

	// ErrInvalidURL means a URL is malformed or not an http(s) URL that ax
	// may call.
	ErrInvalidURL = errors.New("outbound: invalid URL")

	// ErrUnresolvable means a host name has no address.
	ErrUnresolvable = errors.New("outbound: host does not resolve")

	// ErrRedirect means the destination answered with a redirect, which is
	// not followed.
	ErrRedirect = errors.New("outbound: redirect not followed")

	// ErrResponseTooLarge means a response body is longer than
	// MaxResponseBytes.
	ErrResponseTooLarge = errors.New("outbound: response body too large")
)

// Resolver looks up a host's addresses; *net.Resolver is one. Tests supply
// their own to map names to chosen addresses without touching real DNS.
type Resolver interface {
	LookupIPAddr(ctx context.Context, host string) ([]net.IPAddr, error)
}

// Policy says which destinations outbound requests may reach and how much
// of them they may take. The zero Policy allows public addresses only,
// with the defaults below.
//
// Whatever the flags, these are always blocked: cloud metadata services
// (169.254.169.254, fd00:ec2::254, and a few others named in the source),
// link-local (169.254.0.0/16, fe80::/10), unspecified (0.0.0.0/8, ::),
// multicast, broadcast and reserved addresses (240.0.0.0/4, 192.0.0.0/24,
// 192.88.99.0/24, the documentation ranges, 100::/64, 2001:db8::/32), and
// IPv6 transition addresses whose IPv4 destination the address alone does
// not settle: IPv4-compatible (::/96), IPv4-translated (::ffff:0:0:0/96),
// local-use NAT64 (64:ff9b:1::/48) and Teredo (2001::/32). IPv4 addresses
// inside IPv4-mapped, NAT64 (64:ff9b::/96) and 6to4 (2002::/16) IPv6
// addresses are judged as the IPv4 address they lead to.
type Policy struct {
	// AllowPrivate lets requests reach private networks: RFC 1918
	// (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16), unique local IPv6
	// (fc00::/7), carrier-grade NAT (100.64.0.0/10) and the benchmarking
	// range (198.18.0.0/15). Off by default: set it when receivers live on
	// the operator's own network.
	AllowPrivate bool

	// AllowLoopback lets requests reach the machine ax runs on (127.0.0.0/8,
	// ::1). Off by default; tests and single-machine setups set it.
	AllowLoopback bool

	// Timeout bounds a whole request, from dialing to the end of the
	// response body. A request's context can shorten it (a job's own
	// timeout). Defaults to 30 seconds, the upper end of what the Standard
	// Webhooks specification recommends for callbacks.
	Timeout time.Duration

	// MaxResponseBytes caps how much of a response body can be read; reading
	// past it fails with ErrResponseTooLarge after the first MaxResponseBytes
	// bytes. Defaults to 1 MiB.
	MaxResponseBytes int64

	// Resolver looks up host names. Defaults to net.DefaultResolver.
	Resolver Resolver

	// TLSClientConfig configures TLS, for example to trust a test CA.
	// Defaults to Go's, with the system's roots.
	TLSClientConfig *tls.Config
}

// Defaults of a Policy's zero fields.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxResponseBytes = 1 << 20
)

// NewClient returns an http.Client that only reaches what p allows. Every
// connection is dialed to an address checked against p; redirects are not
// followed (Do returns the 3xx response, its body closed, with an error
// wrapping ErrRedirect), as the Standard Webhooks specification advises:
// the URL should be updated instead. Environment proxies are ignored.
func NewClient(p Policy) (*http.Client, error) {
	if err := p.validate(); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would be dialed and checked in place of the destination
		DialContext:            (&dialer{policy: p}).DialContext,
		TLSClientConfig:        p.TLSClientConfig.Clone(),
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           100,
		MaxIdleConnsPerHost:    100, // many callbacks go to the same few receivers: reuse their connections
		IdleConnTimeout:        90 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &http.Client{
		Transport:     &limitedTransport{base: transport, limit: p.MaxResponseBytes},
		CheckRedirect: refuseRedirect,
		Timeout:       p.Timeout,
	}, nil
}

func (p Policy) validate() error {
	if p.Timeout < 0 {
		return fmt.Errorf("outbound: Timeout is %s; it must not be negative", p.Timeout)
	}
	if p.MaxResponseBytes < 0 {
		return fmt.Errorf("outbound: MaxResponseBytes is %d; it must not be negative", p.MaxResponseBytes)
	}
	return nil
}

func (p Policy) withDefaults() Policy {
	p.Timeout = cmp.Or(p.Timeout, DefaultTimeout)
	p.MaxResponseBytes = cmp.Or(p.MaxResponseBytes, DefaultMaxResponseBytes)
	if p.Resolver == nil {
		p.Resolver = net.DefaultResolver
	}
	return p
}

// refuseRedirect is the client's CheckRedirect: it follows nothing, and
// says where the redirect pointed so that the URL can be corrected.
func refuseRedirect(req *http.Request, via []*http.Request) error {
	from := httptask.RedactURL(via[len(via)-1].URL.String())
	status := 0
	if req.Response != nil {
		status = req.Response.StatusCode
	}
	return fmt.Errorf("%w: %s answered %d with Location %s; redirects are refused, so update the URL",
		ErrRedirect, from, status, httptask.RedactURL(req.URL.String()))
}

// Explain says why err refused a destination, in words fit for whoever
// chose the URL: a name is never followed by the address it resolved to,
// nor a failed lookup by the resolver's own message (its address, search
// domains), so that the API cannot be used to map internal names. A
// literal address, which the caller gave, is named with the reason. Other
// errors keep their text. Operators find the full error in the logs.
func Explain(err error) string {
	var blocked *BlockedError
	switch {
	case errors.As(err, &blocked) && blocked.Host != "" && blocked.Host != blocked.Addr.String():
		return fmt.Sprintf("host %q resolves to an address ax may not call (loopback and private addresses only "+
			"when the operator allows them; cloud metadata, link-local and reserved ones never)", blocked.Host)
	case errors.As(err, &blocked):
		return blocked.Error()
	case errors.Is(err, ErrUnresolvable):
		var name *hostError
		if errors.As(err, &name) {
			return fmt.Sprintf("host %q does not resolve", name.host)
		}
		return ErrUnresolvable.Error()
	}
	return err.Error()
}

// hostError is a failed lookup of host; its text holds the resolver's
// message, which Explain leaves out.
type hostError struct {
	host string
	err  error
}

func (e *hostError) Error() string { return fmt.Sprintf("%s: %q: %v", ErrUnresolvable, e.host, e.err) }

func (e *hostError) Unwrap() []error { return []error{ErrUnresolvable, e.err} }
