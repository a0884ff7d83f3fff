package dbtest

import (
	"net/url"
	"testing"
)

// WithParams returns rawURL with the query parameters params (name,
// value, name, value…) set, whether or not rawURL has a query string
// already: appending "&pool_max_conns=20" to postgres://…/postgres names
// a database "postgres&pool_max_conns=20".
func WithParams(t testing.TB, rawURL string, params ...string) string {
	t.Helper()
	if len(params)%2 != 0 {
		t.Fatalf("WithParams takes name, value pairs; got %d strings", len(params))
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatalf("error parsing database url: %v", err)
	}
	q := u.Query()
	for i := 0; i < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}
