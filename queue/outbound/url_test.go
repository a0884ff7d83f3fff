package outbound_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/outbound"
)

func TestValidateURL(t *testing.T) {
	t.Parallel()
	// Only validated, never requested: public.test's address gets no traffic.
	resolver := newResolver(map[string][]string{
		"public.test":    {"93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"},
		"evil.test":      {"10.0.0.1"},
		"metadata.test":  {"169.254.169.254"},
		"localhost.test": {"127.0.0.1", "::1"},
	})
	strict := outbound.Policy{Resolver: resolver}
	loopback := outbound.Policy{Resolver: resolver, AllowLoopback: true}
	private := outbound.Policy{Resolver: resolver, AllowPrivate: true}
	tests := []struct {
		url    string
		policy outbound.Policy
		want   error  // nil: valid
		reason string // in the error
	}{
		{"https://public.test/callbacks/ax", strict, nil, ""},
		{"http://public.test:8080/x?y=1#frag", strict, nil, ""},
		{"HTTPS://public.test/", strict, nil, ""},
		{"http://93.184.216.34/", strict, nil, ""},
		{"http://[2606:2800:220:1:248:1893:25c8:1946]:443/", strict, nil, ""},
		{"http://127.0.0.1:8080/", loopback, nil, ""},
		{"http://localhost.test/", loopback, nil, ""},
		{"http://evil.test/", private, nil, ""},

		{"ftp://public.test/file", strict, outbound.ErrInvalidURL, `scheme "ftp" is not allowed; use http or https`},
		{"file:///etc/passwd", strict, outbound.ErrInvalidURL, `scheme "file" is not allowed`},
		{"gopher://public.test/", strict, outbound.ErrInvalidURL, `scheme "gopher"`},
		{"//public.test/", strict, outbound.ErrInvalidURL, `scheme "" is not allowed`},
		{"/relative/path", strict, outbound.ErrInvalidURL, `scheme "" is not allowed`},
		{"https://user:secret@public.test/", strict, outbound.ErrInvalidURL, "user info (user:password@) is not allowed"},
		{"https://token@public.test/", strict, outbound.ErrInvalidURL, "user info"},
		{"http:///path", strict, outbound.ErrInvalidURL, "has no host"},
		{"http:public.test", strict, outbound.ErrInvalidURL, "has no host"},
		{"http://public.test:0/", strict, outbound.ErrInvalidURL, `port "0" is not between 1 and 65535`},
		{"http://public.test:99999/", strict, outbound.ErrInvalidURL, `port "99999"`},
		{"http://public.test:port/", strict, outbound.ErrInvalidURL, "invalid port"},
		{"http://bad host/", strict, outbound.ErrInvalidURL, "invalid character"},

		{"http://169.254.169.254/latest/meta-data/", loopback, outbound.ErrBlocked, "169.254.169.254 is blocked: cloud metadata address, always blocked"},
		{"http://[fd00:ec2::254]/latest/meta-data/", private, outbound.ErrBlocked, "cloud metadata address"},
		{"http://[::ffff:169.254.169.254]/", private, outbound.ErrBlocked, "cloud metadata address"},
		{"http://metadata.test/", private, outbound.ErrBlocked, `"metadata.test" resolves to 169.254.169.254, which is blocked: cloud metadata address`},
		{"http://evil.test/", loopback, outbound.ErrBlocked, `"evil.test" resolves to 10.0.0.1, which is blocked: private address, allowed only with AllowPrivate`},
		{"http://10.0.0.1/", strict, outbound.ErrBlocked, "private address"},
		{"http://192.168.0.10:9000/", strict, outbound.ErrBlocked, "private address"},
		{"http://100.64.1.1/", strict, outbound.ErrBlocked, "private address"},
		{"http://127.0.0.1/", strict, outbound.ErrBlocked, "loopback address, allowed only with AllowLoopback"},
		{"http://[::1]/", private, outbound.ErrBlocked, "loopback address"},
		{"http://localhost.test/", strict, outbound.ErrBlocked, "loopback address"},
		{"http://0.0.0.0/", loopback, outbound.ErrBlocked, "unspecified address"},
		{"http://[::]/", loopback, outbound.ErrBlocked, "unspecified address"},
		{"http://224.0.0.1/", strict, outbound.ErrBlocked, "multicast address"},
		{"http://255.255.255.255/", strict, outbound.ErrBlocked, "broadcast address"},
		{"http://[fe80::1%25eth0]/", private, outbound.ErrBlocked, "link-local address"},
		{"http://nowhere.test/", strict, outbound.ErrUnresolvable, `"nowhere.test"`},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			t.Parallel()
			u, err := tt.policy.ValidateURL(t.Context(), tt.url)
			if tt.want == nil {
				require.NoError(t, err)
				require.NotNil(t, u)
				return
			}
			require.ErrorIs(t, err, tt.want)
			require.ErrorContains(t, err, tt.reason)
			require.Nil(t, u)
		})
	}
}
