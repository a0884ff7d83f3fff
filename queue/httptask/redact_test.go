package httptask

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A transport error quotes the URL: its query values are hidden, so the
// task's error, shown to read keys, does not carry ?sig=.
func TestRedactURLError(t *testing.T) {
	_, err := http.Get("http://127.0.0.1:1/run?sig=s3cret&day=1")
	require.Error(t, err)
	require.Contains(t, err.Error(), "s3cret")
	err = RedactURLError(err)
	require.NotContains(t, err.Error(), "s3cret")
	require.Contains(t, err.Error(), "http://127.0.0.1:1/run?sig=ax-redacted&day=ax-redacted")
}
