package outbound

import (
	"context"
	"fmt"
	"net/url"
	"strconv"

	"github.com/ax-scheduler/ax/queue/httptask"
)

// ValidateURL checks a URL when it is submitted (a job's callback URL or
// HTTP target), so that the API can refuse it with a reason: it must parse,
// use http or https, hold no user info (credentials go in headers, not in a
// URL that is logged and shown), name a host, and that host must resolve to
// addresses p allows. It returns the parsed URL.
//
// Passing does not make later requests safe by itself: the name may resolve
// elsewhere by then. The client from NewClient checks again at every
// connection.
func (p Policy) ValidateURL(ctx context.Context, rawURL string) (*url.URL, error) {
	u, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	if _, err := p.resolve(ctx, u.Hostname()); err != nil {
		return nil, err
	}
	return u, nil
}

// parseURL checks the parts of a URL that need no lookup.
func parseURL(rawURL string) (*url.URL, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%w: scheme %q is not allowed; use http or https", ErrInvalidURL, u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("%w: user info (user:password@) is not allowed in the URL; send credentials in headers", ErrInvalidURL)
	case u.Hostname() == "":
		return nil, fmt.Errorf("%w: %q has no host", ErrInvalidURL, httptask.RedactURL(u.String()))
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%w: port %q is not between 1 and 65535", ErrInvalidURL, port)
		}
	}
	return u, nil
}
