package agent

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"
)

// maxHostName is the longest host name the server stores.
const maxHostName = 255

// localHostName is the machine's host name reduced to what the server
// accepts (letters, digits, '.', '_' and '-', at most 255 bytes): the
// host name is recorded on task events, so a strange one must not cost
// the registration.
func localHostName() string {
	host, _ := os.Hostname()
	return sanitizeHostName(host)
}

// sanitizeHostName keeps the characters of host the server accepts, and
// at most maxHostName bytes of them.
func sanitizeHostName(host string) string {
	host = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return -1
	}, host)
	return host[:min(len(host), maxHostName)]
}

// localIP is the address of this machine on the route to serverURL: the
// local end of a UDP socket connected there (which sends nothing). ""
// when there is no such route or URL.
func localIP(ctx context.Context, serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second) // a name lookup at most
	defer cancel()
	conn, err := (&net.Dialer{}).DialContext(ctx, "udp", net.JoinHostPort(u.Hostname(), port))
	if err != nil {
		return ""
	}
	defer conn.Close()
	ap, err := netip.ParseAddrPort(conn.LocalAddr().String())
	if err != nil {
		return ""
	}
	return ap.Addr().Unmap().WithZone("").String()
}
