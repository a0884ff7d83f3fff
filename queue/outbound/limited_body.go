package outbound

import (
	"fmt"
	"io"
	"net/http"
)

// limitedTransport caps the body of every response at limit bytes.
type limitedTransport struct {
	base  http.RoundTripper
	limit int64
}

func (t *limitedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	resp.Body = &limitedBody{body: resp.Body, limit: t.limit}
	return resp, nil
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the
// underlying transport.
func (t *limitedTransport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// limitedBody reads up to limit bytes of body and fails with
// ErrResponseTooLarge when there is more, unlike io.LimitReader, which would
// end quietly and pass a truncated body for a whole one.
type limitedBody struct {
	body  io.ReadCloser
	limit int64
	read  int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.read > b.limit {
		return 0, b.tooLarge()
	}
	if room := b.limit - b.read + 1; int64(len(p)) > room {
		p = p[:room] // at most one byte past the limit: enough to tell a longer body from an exact one
	}
	n, err := b.body.Read(p)
	b.read += int64(n)
	if b.read > b.limit {
		return n - int(b.read-b.limit), b.tooLarge()
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.body.Close() }

func (b *limitedBody) tooLarge() error {
	return fmt.Errorf("%w: more than %d bytes", ErrResponseTooLarge, b.limit)
}
