// Package openapi is ax's HTTP API: Huma operations (one file per
// resource), authentication, and the OpenAPI document generated from them.
package openapi

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"
	gojson "github.com/goccy/go-json"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/httptask"
)

// Config holds what the API needs. Only Version matters for generating the
// spec; serving needs Engine too.
type Config struct {
	// Engine is the engine's services (queue.NewEngine), built once by
	// the caller and shared with the console: the API builds none. Nil
	// only when generating the spec.
	Engine *queue.Engine
	// Logger receives request and change logs. Defaults to discarding.
	Logger *slog.Logger
	// Version of the build, reported by /healthz and /readyz.
	Version string
	// Ready reports whether this replica can serve (database reachable,
	// migrations current). Nil means always ready. /readyz shows the
	// Reason of a *NotReadyError and logs the rest.
	Ready func(ctx context.Context) error
	// Degraded lists what works in a lesser way on this replica (its
	// waits polled because notifications are lost), shown by /readyz
	// while ready. Nil: nothing.
	Degraded func() []string
	// Outbound is what callback and HTTP-job URLs may reach, checked when
	// a job is saved (and again by the senders at every connection). The
	// zero policy allows public addresses only.
	Outbound queue.OutboundPolicy
	// BodyReadTimeout is how long a request body may take to arrive,
	// counted from the start of the request; operations may cut it
	// shorter (huma's default is 5 s). Defaults to 10 seconds.
	BodyReadTimeout time.Duration
	// BodyMemoryBudget is how many bytes of request bodies this replica
	// serves at once: a body counts from before it is read (its
	// Content-Length, or its operation's limit when it has none) until its
	// request is answered, and one that would pass the budget is refused
	// with 503 and Retry-After before it is read. Serving a body takes a
	// few times its size in memory (decoded, validated, encoded for
	// Postgres), so this bounds what concurrent large requests (batches,
	// declarations, agents' results) may take; bodies no API key stands
	// for may take a quarter of it at most. Defaults to
	// DefaultBodyMemoryBudget (64 MiB); negative: no budget.
	BodyMemoryBudget int64
	// MetricsHandler, when set, is served at GET /metrics (Prometheus).
	MetricsHandler http.Handler
	// MetricsAuth makes /metrics require an API key with scope read.
	MetricsAuth bool
	// RequestTurns is how many calls other than agents' run at once on
	// this replica (TurnsFor the request pool's connections): while more
	// wait, they go API key by API key in turn (fairTurns). 0: as they
	// come.
	RequestTurns int
	// Turns hears the turns' waits and refusals. Nil: no one.
	Turns TurnObserver
	// turnGranted, set by tests (LogTurns), hears each turn given.
	turnGranted func(keyID [16]byte)
	// PublicURL is where targets of HTTP jobs reach this API: the
	// completion URL of the HTTP tasks leased to agents is on it (ax
	// serve's own requests take theirs from delivery.HTTPTaskConfig, set
	// to the same). Empty: agents' HTTP tasks carry no completion URL.
	PublicURL string
}

// TurnsFor is how many calls take turns at once over a request pool of
// conns connections: twice as many, so a call's work between its
// statements (decoding, building a batch's arrays) can overlap another's
// statement; a key's call still waits for at most the calls running and
// one turn of each key ahead of it. (BenchmarkDelayedRuns' inserts over
// HTTP, from 4 posters, were 5% lower than before turns at the median of
// 5 pairs, with one turn per connection and with two alike; with two no
// poster waits for a turn, so waiting is not what costs them.)
func TurnsFor(conns int) int { return 2 * conns }

// largeBodyReadTimeout is how long a body of megabytes (an agent's logs
// and results, a batch of runs, a declaration set: up to 8 MiB) may take
// to arrive. huma's default of 5 s asks 1.7 MB/s of the sender, more than
// a remote site's link or a busy machine gives: a 4 MiB log post got 408
// on a loaded CI machine.
const largeBodyReadTimeout = 30 * time.Second

// New builds the API: the http.Handler to serve and the huma.API that
// describes it.
func New(cfg Config) (http.Handler, huma.API) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	eng := cfg.Engine
	if eng == nil {
		eng = &queue.Engine{} // generating the spec: operations are registered, never called
	}
	mux := http.NewServeMux()
	api := humago.New(mux, apiConfig(cfg.Logger))
	auth := &authenticator{keys: eng.Keys, signing: eng.SigningKeys, api: api, logger: cfg.Logger}
	auth.cache.revoked = eng.KeyRevocations()
	if cfg.RequestTurns > 0 {
		auth.turns = newFairTurns(cfg.RequestTurns, cfg.turnGranted, cfg.Turns)
	}
	idem := &idempotency{store: eng.Idempotency, api: api, logger: cfg.Logger}
	api.UseMiddleware(auth.middleware, storableBodies(api), idem.middleware)

	urls := &urlChecker{policy: cfg.Outbound, logger: cfg.Logger}
	guard := groupGuard{jobs: eng.Jobs, execs: eng.Executions, classes: eng.Classes}
	jobs := &jobHandlers{jobs: eng.Jobs, urls: urls, guard: guard}
	jobs.register(api)
	(&declarationHandlers{decls: eng.Declarations, urls: urls, guard: guard}).register(api)
	(&executionHandlers{execs: eng.Executions, waiter: eng.Waiter, callbacks: eng.Callbacks, guard: guard}).register(api)
	(&outboundHandlers{jobs: eng.Jobs, execs: eng.Executions, callbacks: eng.Callbacks, urls: urls, logger: cfg.Logger,
		guard: guard, completer: eng.Completer}).register(api)
	(&agentHandlers{keys: eng.Keys, agents: eng.Leases, publicURL: cfg.PublicURL, forgetKey: auth.cache.forget}).register(api)
	(&keyHandlers{keys: eng.Keys, signing: auth.signing, forgetKeys: auth.cache.forgetAll}).register(api)
	(&classHandlers{classes: eng.Classes}).register(api)
	(&calendarHandlers{calendars: eng.Calendars}).register(api)
	(&backfillHandlers{backfills: eng.Backfills, guard: guard}).register(api)
	(&noticeHandlers{notices: eng.Notices, urls: urls, guard: guard}).register(api)
	(&historyHandlers{history: eng.History}).register(api)
	registerCronPreview(api, eng.Calendars)
	(&healthHandlers{version: cfg.Version, ready: cfg.Ready, degraded: cfg.Degraded, logger: cfg.Logger}).register(api)
	registerPatches(api)
	registerCallbackWebhook(api)
	registerHTTPTaskWebhook(api)
	finishSpec(api.OpenAPI())
	mux.Handle("GET /docs", docsHandler(api))
	mux.Handle("GET /docs/guide/{$}", guideHandler())
	mux.Handle("GET /docs/guide/{page}", guideHandler())
	mux.Handle("GET /docs/guide", http.RedirectHandler("/docs/guide/", http.StatusMovedPermanently))
	mux.Handle("GET /docs/search", docsSearchHandler(api))
	if cfg.MetricsHandler != nil {
		metrics := cfg.MetricsHandler
		if cfg.MetricsAuth {
			metrics = auth.protect(ScopeRead, "/metrics", metrics)
		}
		mux.Handle("GET /metrics", metrics)
	}
	return newBodyGuard(mux, api, cmp.Or(cfg.BodyReadTimeout, 10*time.Second),
		cmp.Or(cfg.BodyMemoryBudget, DefaultBodyMemoryBudget), cfg.Logger), api
}

// schemaName names the spec's schemas after their Go types; those of
// package httptask (the HTTP task contract: Envelope, Shard…) are
// prefixed with HTTPTask, as its package name says in Go.
func schemaName(t reflect.Type, hint string) string {
	name := huma.DefaultSchemaNamer(t, hint)
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.PkgPath() == reflect.TypeFor[httptask.Envelope]().PkgPath() {
		return "HTTPTask" + name
	}
	return name
}

func apiConfig(logger *slog.Logger) huma.Config {
	cfg := huma.DefaultConfig("ax", SpecVersion)
	cfg.Transformers = append(cfg.Transformers, hideInternalErrors(logger))
	cfg.DocsPath = "" // our own page (docs.go): huma's loads its viewer from a CDN
	// Where `make run` serves; a deployment serves the same paths at its own URL.
	cfg.Servers = []*huma.Server{{URL: "http://127.0.0.1:8080", Description: "ax on this machine (make run)"}}
	cfg.Info.Contact = &huma.Contact{Name: "ax maintainers", URL: "https://github.com/ax-scheduler/ax/issues"}
	cfg.Info.Description = "ax is a distributed job scheduler whose state lives in PostgreSQL. " +
		"Authenticate with `Authorization: Bearer <api key>`, or sign each request with HMAC (headers Ax-Key-Id, " +
		"Ax-Timestamp, Ax-Nonce, Ax-Signature; see the README): a signed request is accepted once, within 5 minutes. " +
		"Every POST, PUT, PATCH and DELETE honours an Idempotency-Key header (same key and body: the first answer again; " +
		"same key, other body: 422). Errors are RFC 9457 problem documents."
	// No $schema links in bodies: clients round-trip job documents (PUT
	// what GET returned) and strict clients would trip on the extra field.
	cfg.CreateHooks = nil
	cfg.Components.SecuritySchemes = map[string]*huma.SecurityScheme{
		securitySchemeName: {Type: "http", Scheme: "bearer", Description: "An ax API key."},
	}
	cfg.Components.Schemas = huma.NewMapRegistry("#/components/schemas/", schemaName)
	cfg.RejectUnknownQueryParameters = true
	cfg.Formats = maps.Clone(cfg.Formats)
	cfg.Formats["application/json"] = jsonFormat
	cfg.Formats["json"] = jsonFormat
	return cfg
}

// jsonFormat is huma's JSON format on goccy/go-json, a drop-in for
// encoding/json: huma decodes every body twice (once to validate, once
// into its type), and agents' result batches and lease replies are the
// bulk of ax's traffic. Bodies that are not UTF-8 or nest deeper than
// maxBodyDepth are refused before they are decoded.
var jsonFormat = huma.Format{
	Marshal: func(w io.Writer, v any) error {
		enc := gojson.NewEncoder(w)
		enc.SetEscapeHTML(false)
		return enc.Encode(v)
	},
	Unmarshal: func(data []byte, v any) error {
		if err := checkBody(data); err != nil {
			return err
		}
		return gojson.Unmarshal(data, v)
	},
}
