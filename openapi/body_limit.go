package openapi

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
)

// noBodyLimit caps the body of an operation that takes none (clients
// that send `{}` with a trigger still get through).
const noBodyLimit = 64 << 10

// errBodyTooLarge is what readLimited returns for a body past its
// operation's limit.
var errBodyTooLarge = errors.New("request body is too large")

// bodyGuard stands in front of every operation, before authentication:
// a body whose Content-Length passes the operation's limit is refused
// with 413 before a byte of it is read, any other body is cut at the
// limit (so no middleware or handler can read more), and a body must
// arrive within the read timeout. Huma's own per-operation checks still
// apply behind it.
type bodyGuard struct {
	mux     *http.ServeMux
	api     huma.API
	limits  map[string]bodyLimit // by mux pattern: "POST /v1/jobs"
	timeout time.Duration
}

type bodyLimit struct {
	op    *huma.Operation
	bytes int64
}

func newBodyGuard(mux *http.ServeMux, api huma.API, timeout time.Duration) *bodyGuard {
	g := &bodyGuard{mux: mux, api: api, limits: map[string]bodyLimit{}, timeout: timeout}
	for _, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch, item.Head, item.Options} {
			if op != nil {
				limit := op.MaxBodyBytes
				if op.RequestBody == nil || limit <= 0 {
					limit = max(limit, noBodyLimit)
				}
				g.limits[op.Method+" "+op.Path] = bodyLimit{op: op, bytes: limit}
			}
		}
	}
	return g
}

func (g *bodyGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		g.mux.ServeHTTP(w, r)
		return
	}
	_, pattern := g.mux.Handler(r)
	limit, ok := g.limits[pattern]
	if !ok {
		// No operation here (404, 405, docs): nothing will read the body.
		limit = bodyLimit{op: &huma.Operation{Method: r.Method, Path: r.URL.Path}, bytes: noBodyLimit}
	}
	if r.ContentLength > limit.bytes {
		w.Header().Set("Connection", "close")
		_ = huma.WriteErr(g.api, humago.NewContext(limit.op, r, w), http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body is too large limit=%d bytes", limit.bytes))
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.timeout))
	// One byte past the limit, so that readers that read limit+1 to tell
	// "too large" (huma, readLimited) see it and answer 413 themselves.
	r.Body = http.MaxBytesReader(w, r.Body, limit.bytes+1)
	g.mux.ServeHTTP(w, r)
}
