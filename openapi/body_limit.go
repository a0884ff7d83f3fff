package openapi

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
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
//
// A read deadline is for the body alone. Once the body is read (before
// the handler when there is none), net/http clears the deadline and reads
// the connection in the background to see the client leave; a deadline
// set after that cancels the request's context when it passes
// (golang/go#70834). Huma sets its body timeout (5 s unless the operation
// says) whether a body came or not, so it became a limit on the handler:
// a run triggered while the database was slow failed with "context
// canceled" after 5 s. Without a body, the deadlines it sets are ignored.
//
// Bodies share a memory budget (see Config.BodyMemoryBudget): a body is
// counted from before it is read (its Content-Length, or its operation's
// limit when it has none, until it is read whole) until its request is
// answered (a long poll's until it is read), and one that would take the
// bodies in flight past the budget is refused with 503 and Retry-After
// before a byte of it is read.
//
// Bodies no credential stands for (operations that take no API key, such
// as an HTTP target's POST /v1/tasks/{id}/complete, and paths of no
// operation) share a quarter of the budget at most (anonymousShare).
// Anyone can send them, slowly: about 480 such bodies of 136 KiB, each
// held until the read timeout, took the whole budget, and every agent's
// heartbeat and results got 503. Bodies of operations that need a key
// are refused before they are read when the key is missing or wrong (the
// authenticator answers before the handler reads; a signed request's
// body is read once its signing key id is known, before its signature is
// checked), so only who holds a key, or knows a signing key's id, can
// hold the rest.
type bodyGuard struct {
	mux     *http.ServeMux
	api     huma.API
	limits  map[string]bodyLimit // by mux pattern: "POST /v1/jobs"
	timeout time.Duration
	budget  *bodyBudget
	logger  *slog.Logger
}

// DefaultBodyMemoryBudget is Config.BodyMemoryBudget's default: eight
// bodies of the largest kind (8 MiB: batches, declarations, the agent
// protocol) at once.
const DefaultBodyMemoryBudget = 64 << 20

// MinBodyMemoryBudget is the smallest budget that lets every body
// through when it is alone: the largest body limit (batches,
// declarations, the agent protocol).
const MinBodyMemoryBudget = 8 << 20

// bodyBudgetRetryAfter is what a request refused for the budget is told
// to wait: bodies of megabytes are answered within seconds.
const bodyBudgetRetryAfter = 2 * time.Second

// bodyBudget counts the bytes of the bodies being served.
type bodyBudget struct {
	limit int64 // < 0: unbounded
	used  atomic.Int64
	// anonymous counts the bodies of them no credential stands for, which
	// may be anonymousShare of limit at most.
	anonymous atomic.Int64
}

// anonymousShare is the part of the budget bodies no credential stands
// for may hold together (bodyGuard): a quarter, 16 MiB of the default
// budget, about 120 HTTP task completions of the largest size at once.
const anonymousShare = 4

// takeAnonymous counts n bytes of a body no credential stands for, unless
// that would pass the budget or its anonymous share.
func (b *bodyBudget) takeAnonymous(n int64) bool {
	if b.limit < 0 {
		return true
	}
	for {
		used := b.anonymous.Load()
		if used+n > b.limit/anonymousShare {
			return false
		}
		if b.anonymous.CompareAndSwap(used, used+n) {
			break
		}
	}
	if !b.take(n) {
		b.anonymous.Add(-n)
		return false
	}
	return true
}

func (b *bodyBudget) releaseAnonymous(n int64) {
	if b.limit >= 0 {
		b.anonymous.Add(-n)
		b.used.Add(-n)
	}
}

// take counts n bytes in, unless that would pass the budget.
func (b *bodyBudget) take(n int64) bool {
	if b.limit < 0 {
		return true
	}
	for {
		used := b.used.Load()
		if used+n > b.limit {
			return false
		}
		if b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *bodyBudget) release(n int64) {
	if b.limit >= 0 {
		b.used.Add(-n)
	}
}

type bodyLimit struct {
	op    *huma.Operation
	bytes int64
	// freedOnceRead: the operation's input is a few bounded fields, and
	// its handler may then wait long (a long poll), so its body leaves
	// the budget once read. Counted until answered, two chunked lease
	// polls (each counted at the operation's 8 MiB) waiting 25 s held the
	// whole budget of a replica with 16 MiB, and every other agent's
	// heartbeat and results got 503.
	freedOnceRead bool
}

// keyed reports whether a credential stands for the body: the operation
// needs an API key (bearer or signed), so a request without a valid one
// is answered before its body is read.
func (l bodyLimit) keyed() bool {
	scope, _ := l.op.Metadata[scopeMetadataKey].(string)
	return scope != ""
}

// freedOnceRead are the operations whose bodies leave the budget once
// read (bodyLimit.freedOnceRead).
var freedOnceRead = map[string]bool{"lease-tasks": true}

func newBodyGuard(mux *http.ServeMux, api huma.API, timeout time.Duration, budget int64, logger *slog.Logger) *bodyGuard {
	g := &bodyGuard{mux: mux, api: api, limits: map[string]bodyLimit{}, timeout: timeout, budget: &bodyBudget{limit: budget},
		logger: logger}
	for _, item := range api.OpenAPI().Paths {
		for _, op := range []*huma.Operation{item.Get, item.Put, item.Post, item.Delete, item.Patch, item.Head, item.Options} {
			if op != nil {
				limit := op.MaxBodyBytes
				if op.RequestBody == nil || limit <= 0 {
					limit = max(limit, noBodyLimit)
				}
				g.limits[op.Method+" "+op.Path] = bodyLimit{op: op, bytes: limit, freedOnceRead: freedOnceRead[op.OperationID]}
			}
		}
	}
	return g
}

func (g *bodyGuard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		g.mux.ServeHTTP(readDone{w}, r)
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
	size := r.ContentLength
	if size < 0 { // chunked: as much as the operation takes
		size = limit.bytes
	}
	anonymous := !limit.keyed()
	take, release := g.budget.take, g.budget.release
	if anonymous {
		take, release = g.budget.takeAnonymous, g.budget.releaseAnonymous
	}
	if !take(size) {
		g.logger.WarnContext(r.Context(), "request refused: the body memory budget is spent", "method", r.Method,
			"path", r.URL.Path, "body_bytes", size, "budget_bytes", g.budget.limit, "in_use_bytes", g.budget.used.Load(),
			"anonymous", anonymous, "anonymous_bytes", g.budget.anonymous.Load())
		w.Header().Set("Connection", "close")
		w.Header().Set("Retry-After", strconv.Itoa(int(bodyBudgetRetryAfter/time.Second)))
		_ = huma.WriteErr(g.api, humago.NewContext(limit.op, r, w), http.StatusServiceUnavailable,
			fmt.Sprintf("the server is busy with other large requests (bodies of %d bytes at once at most): retry later", g.budget.limit))
		return
	}
	// Counted until answered, but a chunked body (counted at its
	// operation's limit) only as what it was once read whole, and a long
	// poll's not at all (freedOnceRead).
	var held atomic.Int64
	held.Store(size)
	defer func() { release(held.Swap(0)) }()
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(g.timeout))
	// One byte past the limit, so that readers that read limit+1 to tell
	// "too large" (huma, readLimited) see it and answer 413 themselves.
	body := &trackedBody{ReadCloser: http.MaxBytesReader(w, r.Body, limit.bytes+1)}
	body.onEOF = func(read int64) {
		keep := read
		if limit.freedOnceRead {
			keep = 0
		}
		if was := held.Load(); keep < was && held.CompareAndSwap(was, keep) {
			release(was - keep)
		}
	}
	r.Body = body
	if r.ProtoMajor != 1 {
		g.mux.ServeHTTP(w, r) // HTTP/2 streams have no body to drain first
		return
	}
	g.mux.ServeHTTP(&unreadBodyCloser{ResponseWriter: w, body: body}, r)
}

// trackedBody notes when its body has been read to the end. A body that
// failed (too large, too slow) is not done: its connection closes after
// the answer, where net/http would otherwise read on to drain it.
type trackedBody struct {
	io.ReadCloser
	done atomic.Bool
	read int64 // bytes read so far (by the one reader of a body)
	// onEOF, when set, is told the body's size once it is read whole.
	onEOF func(read int64)
}

func (b *trackedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if err == io.EOF && !b.done.Swap(true) && b.onEOF != nil {
		b.onEOF(b.read)
	}
	return n, err
}

// readDone serves a request without a body: a read deadline set for one
// would only cut the handler short (see bodyGuard).
type readDone struct{ http.ResponseWriter }

func (readDone) SetReadDeadline(time.Time) error { return nil }

// Unwrap lets http.ResponseController reach the real writer.
func (w readDone) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// unreadBodyCloser closes the connection after an answer given before the
// body was read (401, 403, 404, 413...). Otherwise net/http would first
// read and discard up to 256 KiB of the body, waiting on a client that
// may never send it, before answering at all.
type unreadBodyCloser struct {
	http.ResponseWriter
	body        *trackedBody
	wroteHeader bool
}

func (w *unreadBodyCloser) WriteHeader(code int) {
	if !w.wroteHeader && !w.body.done.Load() {
		w.Header().Set("Connection", "close")
	}
	w.wroteHeader = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *unreadBodyCloser) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *unreadBodyCloser) Unwrap() http.ResponseWriter { return w.ResponseWriter }
