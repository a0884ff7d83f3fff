package openapi

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadDeadlinesDoNotCutHandlers: a handler that runs past its
// operation's body timeout, or past the server's ReadTimeout, once the
// request is read, answers with its context alive, with a body and
// without. A body that does not arrive in time is still cut off.
func TestReadDeadlinesDoNotCutHandlers(t *testing.T) {
	t.Parallel()
	// The handler outlasts both deadlines, which the server keeps on the
	// wall clock, by 300 ms: they have fired before it looks at its context.
	const bodyTimeout, readTimeout = 200 * time.Millisecond, 400 * time.Millisecond
	const handlerTime = readTimeout + 300*time.Millisecond
	mux := http.NewServeMux()
	api := humago.New(mux, huma.DefaultConfig("deadlines", "1"))
	// As in the API: a middleware reads the body before huma does.
	api.UseMiddleware(storableBodies(api))
	type input struct {
		Body *struct {
			N int `json:"n"`
		} `required:"false"`
	}
	type output struct {
		Body struct {
			Err string `json:"err"`
		}
	}
	huma.Register(api, huma.Operation{OperationID: "slow", Method: http.MethodPost, Path: "/slow", BodyReadTimeout: bodyTimeout},
		func(ctx context.Context, _ *input) (*output, error) {
			time.Sleep(handlerTime)
			out := &output{}
			if err := ctx.Err(); err != nil {
				out.Body.Err = err.Error()
			}
			return out, nil
		})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: newBodyGuard(mux, api, 10*time.Second, -1, slog.New(slog.DiscardHandler)), ReadTimeout: readTimeout}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "http://" + ln.Addr().String() + "/slow"

	for _, tc := range []struct{ name, body string }{{"with a body", `{"n": 1}`}, {"without", ""}} {
		resp, err := http.Post(url, "application/json", strings.NewReader(tc.body))
		require.NoError(t, err, tc.name)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out), tc.name)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "%s: %v", tc.name, out)
		assert.Equal(t, "", out["err"], "%s: the handler's context", tc.name)
	}

	// A body that stops arriving is cut at the operation's timeout.
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = conn.Write([]byte("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"n\":"))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusRequestTimeout, resp.StatusCode, "a body cut short is refused")
	require.True(t, resp.Close, "its connection is not kept to drain the rest")
	require.Less(t, time.Since(start), 3*time.Second, "cut at the body timeout, not the client's patience")
}
