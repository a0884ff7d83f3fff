package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"
	"time"
)

// dialer opens the client's connections: it resolves the host once,
// checks every address, and dials the checked addresses only, so a name
// cannot resolve to something else between the check and the connection.
type dialer struct {
	policy Policy
}

// DialContext is the transport's dial function.
func (d *dialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("outbound: bad address %q: %w", address, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("outbound: bad port in %q: %w", address, err)
	}
	addrs, err := d.policy.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	return d.dialFirst(ctx, network, addrs, uint16(port))
}

// dialFirst tries addrs in order and returns the first connection made.
func (d *dialer) dialFirst(ctx context.Context, network string, addrs []netip.Addr, port uint16) (net.Conn, error) {
	nd := &net.Dialer{Timeout: 10 * time.Second, Control: d.control}
	var errs []error
	for _, addr := range addrs {
		conn, err := nd.DialContext(ctx, network, netip.AddrPortFrom(addr, port).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// control checks the address about to be connected once more, at the
// socket: whatever path led here, a blocked address is not dialed.
func (d *dialer) control(_, address string, _ syscall.RawConn) error {
	addrPort, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("outbound: unexpected dial address %q: %w", address, err)
	}
	return d.policy.check("", addrPort.Addr())
}

// resolve returns host's addresses when p allows every one of them. A
// literal address is checked as is; a name is looked up once, and refused
// as a whole if any of its addresses is blocked.
func (p Policy) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	if host == "" {
		return nil, fmt.Errorf("%w: no host", ErrInvalidURL) // Go would dial the local machine
	}
	if addr, err := netip.ParseAddr(host); err == nil {
		if err := p.check("", addr); err != nil {
			return nil, err
		}
		return []netip.Addr{addr}, nil
	}
	found, err := p.resolver().LookupIPAddr(ctx, host)
	if err != nil {
		return nil, &hostError{host: host, err: err}
	}
	if len(found) == 0 {
		return nil, &hostError{host: host, err: errors.New("no addresses")}
	}
	addrs := make([]netip.Addr, 0, len(found))
	for _, ipAddr := range found {
		addr, ok := netip.AddrFromSlice(ipAddr.IP)
		if !ok {
			return nil, &hostError{host: host, err: fmt.Errorf("malformed address %v", ipAddr.IP)}
		}
		addr = addr.Unmap().WithZone(ipAddr.Zone)
		if err := p.check(host, addr); err != nil {
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	return addrs, nil
}

func (p Policy) resolver() Resolver {
	if p.Resolver != nil {
		return p.Resolver
	}
	return net.DefaultResolver
}
