package outbound

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The socket-level check refuses a blocked address even when the
// resolution step is bypassed.
func TestDialerControl(t *testing.T) {
	t.Parallel()
	d := &dialer{policy: Policy{AllowLoopback: true}}
	require.NoError(t, d.control("tcp4", "127.0.0.1:80", nil))
	require.ErrorIs(t, d.control("tcp4", "169.254.169.254:80", nil), ErrBlocked)
	require.ErrorIs(t, d.control("tcp6", "[fd00:ec2::254]:80", nil), ErrBlocked)
	require.ErrorIs(t, d.control("tcp4", "10.0.0.1:443", nil), ErrBlocked)
	require.Error(t, d.control("tcp", "not an address", nil))
}

func TestDialerRefusesEmptyHost(t *testing.T) {
	t.Parallel()
	d := &dialer{policy: Policy{AllowLoopback: true, AllowPrivate: true}}
	_, err := d.DialContext(t.Context(), "tcp", ":80")
	require.ErrorIs(t, err, ErrInvalidURL)
}
