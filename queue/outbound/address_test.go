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
