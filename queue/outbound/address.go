package outbound

import (
	"fmt"
	"net/netip"
)

// class is what kind of destination an address is.
type class int

const (
	classPublic class = iota
	classLoopback
	classPrivate
	classMetadata
	classLinkLocal
	classUnspecified
	classMulticast
	classBroadcast
	classReserved
	classTransition
)

var classNames = map[class]string{
	classPublic:      "public address",
	classLoopback:    "loopback address",
	classPrivate:     "private address",
	classMetadata:    "cloud metadata address",
	classLinkLocal:   "link-local address",
	classUnspecified: "unspecified address",
	classMulticast:   "multicast address",
	classBroadcast:   "broadcast address",
	classReserved:    "reserved address",
	classTransition:  "IPv6 transition address (leads to an IPv4 address ax cannot judge)",
}

func (c class) String() string { return classNames[c] }

// ranges classifies addresses; the first prefix that holds an address
// wins, so single metadata addresses come before the ranges around them.
var ranges = []struct {
	prefix netip.Prefix
	class  class
}{
	{netip.MustParsePrefix("169.254.169.254/32"), classMetadata}, // AWS, GCP, Azure, Oracle, OpenStack…
	{netip.MustParsePrefix("169.254.170.2/32"), classMetadata},   // AWS ECS task credentials
	{netip.MustParsePrefix("fd00:ec2::254/128"), classMetadata},  // AWS over IPv6, inside fc00::/7
	{netip.MustParsePrefix("100.100.100.200/32"), classMetadata}, // Alibaba Cloud, inside 100.64.0.0/10
	{netip.MustParsePrefix("168.63.129.16/32"), classMetadata},   // Azure WireServer, a public-looking address

	{netip.MustParsePrefix("0.0.0.0/8"), classUnspecified}, // "this network": 0.0.0.0 reaches the local host
	{netip.MustParsePrefix("::/128"), classUnspecified},
	{netip.MustParsePrefix("255.255.255.255/32"), classBroadcast},
	{netip.MustParsePrefix("169.254.0.0/16"), classLinkLocal},
	{netip.MustParsePrefix("fe80::/10"), classLinkLocal},
	{netip.MustParsePrefix("224.0.0.0/4"), classMulticast},
	{netip.MustParsePrefix("ff00::/8"), classMulticast},
	{netip.MustParsePrefix("240.0.0.0/4"), classReserved},

	{netip.MustParsePrefix("127.0.0.0/8"), classLoopback},
	{netip.MustParsePrefix("::1/128"), classLoopback},

	// IPv4 special-purpose blocks (RFC 6890) that are not the Internet:
	// protocol assignments (DS-Lite, NAT64 discovery…), the 6to4 relay
	// anycast and documentation ranges.
	{netip.MustParsePrefix("192.0.0.0/24"), classReserved},
	{netip.MustParsePrefix("192.88.99.0/24"), classReserved},
	{netip.MustParsePrefix("192.0.2.0/24"), classReserved},
	{netip.MustParsePrefix("198.51.100.0/24"), classReserved},
	{netip.MustParsePrefix("203.0.113.0/24"), classReserved},
	// IPv6 that tunnels or translates to an IPv4 address in a way the
	// address alone does not settle: IPv4-compatible (deprecated, after ::
	// and ::1 above), IPv4-translated (SIIT), local-use NAT64 (RFC 8215,
	// the network picks where the IPv4 address sits) and Teredo (the
	// client's address obfuscated, the server's in clear).
	{netip.MustParsePrefix("::/96"), classTransition},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), classTransition},
	{netip.MustParsePrefix("64:ff9b:1::/48"), classTransition},
	{netip.MustParsePrefix("2001::/32"), classTransition},
	// IPv6 discard-only and documentation prefixes.
	{netip.MustParsePrefix("100::/64"), classReserved},
	{netip.MustParsePrefix("2001:db8::/32"), classReserved},

	{netip.MustParsePrefix("10.0.0.0/8"), classPrivate},
	{netip.MustParsePrefix("172.16.0.0/12"), classPrivate},
	{netip.MustParsePrefix("192.168.0.0/16"), classPrivate},
	{netip.MustParsePrefix("100.64.0.0/10"), classPrivate}, // carrier-grade NAT
	{netip.MustParsePrefix("198.18.0.0/15"), classPrivate}, // benchmarking, used by some internal networks
	{netip.MustParsePrefix("fc00::/7"), classPrivate},      // unique local
	{netip.MustParsePrefix("fec0::/10"), classPrivate},     // site-local, deprecated but routable on old networks
}

// IPv6 prefixes that carry an IPv4 address and lead to it.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96") // the IPv4 address in the last 4 bytes
	sixToFour   = netip.MustParsePrefix("2002::/16")    // the IPv4 address in bytes 2 to 5
)

// classify says what addr is. An IPv6 address that leads to an IPv4 one
// (mapped, NAT64, 6to4) is classified as that IPv4 address, which is also
// returned as via; otherwise via is addr.
func classify(addr netip.Addr) (c class, via netip.Addr) {
	addr = addr.WithZone("").Unmap()
	if v4, ok := embeddedIPv4(addr); ok {
		addr = v4
	}
	for _, r := range ranges {
		if r.prefix.Contains(addr) {
			return r.class, addr
		}
	}
	return classPublic, addr
}

func embeddedIPv4(addr netip.Addr) (netip.Addr, bool) {
	b := addr.As16()
	switch {
	case !addr.Is6():
		return netip.Addr{}, false
	case nat64Prefix.Contains(addr):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(addr):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// allows reports whether p lets requests reach an address of class c.
func (p Policy) allows(c class) bool {
	switch c {
	case classPublic:
		return true
	case classLoopback:
		return p.AllowLoopback
	case classPrivate:
		return p.AllowPrivate
	}
	return false
}

// CheckAddr reports whether p lets requests reach addr: nil, or a
// *BlockedError saying why not.
func (p Policy) CheckAddr(addr netip.Addr) error {
	return p.check("", addr)
}

// check is CheckAddr for an address that host resolved to.
func (p Policy) check(host string, addr netip.Addr) error {
	if !addr.IsValid() {
		return &BlockedError{Host: host, Addr: addr, Reason: "invalid address", Remedy: "always blocked"}
	}
	c, via := classify(addr)
	if p.allows(c) {
		return nil
	}
	err := &BlockedError{Host: host, Addr: addr, Reason: c.String()}
	if via != addr.WithZone("").Unmap() {
		err.Reason += " (" + via.String() + ")"
	}
	switch c {
	case classLoopback:
		err.Remedy = "allowed only with AllowLoopback"
	case classPrivate:
		err.Remedy = "allowed only with AllowPrivate"
	default:
		err.Remedy = "always blocked"
	}
	return err
}

// BlockedError says which address a Policy refused and why. It matches
// ErrBlocked with errors.Is.
type BlockedError struct {
	// Host is the name that resolved to Addr; empty when Addr was given as
	// such.
	Host string

	// Addr is the refused address.
	Addr netip.Addr

	// Reason is the kind of address, like "cloud metadata address".
	Reason string

	// Remedy says whether a Policy flag would allow it.
	Remedy string
}

func (e *BlockedError) Error() string {
	if e.Host == "" || e.Host == e.Addr.String() {
		return fmt.Sprintf("outbound: %s is blocked: %s, %s", e.Addr, e.Reason, e.Remedy)
	}
	return fmt.Sprintf("outbound: %q resolves to %s, which is blocked: %s, %s", e.Host, e.Addr, e.Reason, e.Remedy)
}

// Unwrap makes errors.Is(err, ErrBlocked) true.
func (e *BlockedError) Unwrap() error { return ErrBlocked }
