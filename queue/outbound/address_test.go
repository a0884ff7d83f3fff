package outbound_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/outbound"
)

func TestCheckAddr(t *testing.T) {
	t.Parallel()
	var (
		strict   = outbound.Policy{}
		loopback = outbound.Policy{AllowLoopback: true}
		private  = outbound.Policy{AllowPrivate: true}
		all      = outbound.Policy{AllowLoopback: true, AllowPrivate: true}
	)
	tests := []struct {
		addr   string
		reason string // empty: public
	}{
		{"93.184.216.34", ""},
		{"2606:2800:220:1:248:1893:25c8:1946", ""},
		{"8.8.8.8", ""},

		{"127.0.0.1", "loopback address"},
		{"127.255.0.9", "loopback address"},
		{"::1", "loopback address"},
		{"::ffff:127.0.0.1", "loopback address"},

		{"10.0.0.1", "private address"},
		{"172.16.0.1", "private address"},
		{"172.31.255.255", "private address"},
		{"192.168.1.1", "private address"},
		{"100.64.0.1", "private address"},
		{"100.127.255.254", "private address"},
		{"198.18.0.1", "private address"},
		{"fd12:3456::1", "private address"},
		{"::ffff:10.1.2.3", "private address"},
		{"64:ff9b::a00:1", "private address (10.0.0.1)"},

		{"172.32.0.1", ""},
		{"100.128.0.1", ""},

		{"169.254.169.254", "cloud metadata address"},
		{"::ffff:169.254.169.254", "cloud metadata address"},
		{"64:ff9b::a9fe:a9fe", "cloud metadata address (169.254.169.254)"},
		{"2002:a9fe:a9fe::1", "cloud metadata address (169.254.169.254)"},
		{"fd00:ec2::254", "cloud metadata address"},
		{"169.254.170.2", "cloud metadata address"},
		{"100.100.100.200", "cloud metadata address"},
		{"168.63.129.16", "cloud metadata address"},
		{"169.254.0.1", "link-local address"},
		{"fe80::1", "link-local address"},
		{"fe80::1%eth0", "link-local address"},
		{"0.0.0.0", "unspecified address"},
		{"0.1.2.3", "unspecified address"},
		{"::", "unspecified address"},
		{"224.0.0.1", "multicast address"},
		{"239.255.255.250", "multicast address"},
		{"ff02::1", "multicast address"},
		{"255.255.255.255", "broadcast address"},
		{"240.0.0.1", "reserved address"},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			t.Parallel()
			addr := netip.MustParseAddr(tt.addr)
			for _, p := range []outbound.Policy{strict, loopback, private, all} {
				err := p.CheckAddr(addr)
				if allowedBy(tt.reason, p) {
					require.NoError(t, err, "policy %+v", p)
					continue
				}
				require.ErrorIs(t, err, outbound.ErrBlocked, "policy %+v", p)
				blocked, ok := err.(*outbound.BlockedError)
				require.True(t, ok)
				require.Equal(t, tt.reason, blocked.Reason)
				require.Contains(t, err.Error(), tt.addr)
			}
		})
	}
}

// allowedBy says whether p should allow an address blocked for reason.
func allowedBy(reason string, p outbound.Policy) bool {
	switch {
	case reason == "":
		return true
	case strings.HasPrefix(reason, "loopback"):
		return p.AllowLoopback
	case strings.HasPrefix(reason, "private"):
		return p.AllowPrivate
	}
	return false
}

func TestBlockedErrorMessages(t *testing.T) {
	t.Parallel()
	err := outbound.Policy{}.CheckAddr(netip.MustParseAddr("10.0.0.1"))
	require.EqualError(t, err, "outbound: 10.0.0.1 is blocked: private address, allowed only with AllowPrivate")
	err = outbound.Policy{AllowPrivate: true, AllowLoopback: true}.CheckAddr(netip.MustParseAddr("169.254.169.254"))
	require.EqualError(t, err, "outbound: 169.254.169.254 is blocked: cloud metadata address, always blocked")
	err = outbound.Policy{}.CheckAddr(netip.Addr{})
	require.ErrorIs(t, err, outbound.ErrBlocked)
}

// TestCheckAddrRefusesTransitionAndSpecialRanges: IPv6 addresses that
// tunnel or translate to an IPv4 address the address alone does not
// settle, and IPv4/IPv6 special-purpose blocks that are not the Internet,
// are refused by every policy, whatever IPv4 address they carry.
func TestCheckAddrRefusesTransitionAndSpecialRanges(t *testing.T) {
	t.Parallel()
	const transition = "IPv6 transition address (leads to an IPv4 address ax cannot judge)"
	tests := []struct {
		name, addr, reason string
	}{
		{"IPv4-compatible loopback (::/96)", "::7f00:1", transition},
		{"IPv4-compatible private (::/96)", "::a00:1", transition},
		{"IPv4-compatible metadata (::/96)", "::a9fe:a9fe", transition},
		{"IPv4-compatible public (::/96)", "::808:808", transition},
		{"IPv4-translated (::ffff:0:0:0/96)", "::ffff:0:a00:1", transition},
		{"local-use NAT64 private (64:ff9b:1::/48)", "64:ff9b:1::a00:1", transition},
		{"local-use NAT64 loopback (64:ff9b:1::/48)", "64:ff9b:1:7f00:1::", transition},
		{"Teredo (2001::/32)", "2001:0:4136:e378:8000:63bf:3fff:fdd2", transition},
		{"Teredo of a private client (2001::/32)", "2001::f5ff:fffe", transition},
		{"IETF protocol assignments (192.0.0.0/24)", "192.0.0.170", "reserved address"},
		{"DS-Lite (192.0.0.0/24)", "192.0.0.1", "reserved address"},
		{"6to4 relay anycast", "192.88.99.1", "reserved address"},
		{"TEST-NET-1", "192.0.2.10", "reserved address"},
		{"TEST-NET-2", "198.51.100.10", "reserved address"},
		{"TEST-NET-3", "203.0.113.10", "reserved address"},
		{"IPv6 discard-only", "100::1", "reserved address"},
		{"IPv6 documentation", "2001:db8::1", "reserved address"},
	}
	policies := []outbound.Policy{{}, {AllowLoopback: true}, {AllowPrivate: true}, {AllowLoopback: true, AllowPrivate: true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, p := range policies {
				err := p.CheckAddr(netip.MustParseAddr(tt.addr))
				require.ErrorIs(t, err, outbound.ErrBlocked, "%s under policy %+v", tt.addr, p)
				var blocked *outbound.BlockedError
				require.ErrorAs(t, err, &blocked)
				require.Equal(t, tt.reason, blocked.Reason)
				require.Equal(t, "always blocked", blocked.Remedy)
			}
		})
	}
	// Neighbours of those blocks stay public.
	for _, addr := range []string{"192.0.1.1", "192.0.3.1", "2001:4860:4860::8888", "2002:808:808::1", "64:ff9b::808:808"} {
		require.NoError(t, outbound.Policy{}.CheckAddr(netip.MustParseAddr(addr)), addr)
	}
}
