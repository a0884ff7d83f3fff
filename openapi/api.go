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
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/clock"
	"github.com/ax-scheduler/ax/queue/delivery"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/httptask"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/outbound"
)

// Config holds what the API needs. Only Version matters for generating the
// spec; serving needs Pool too.
type Config struct {
	// Pool is the database. Nil only when generating the spec. The engine
	// works on it: agents' leases and results, HTTP tasks' completions.
	Pool *pgxpool.Pool
	// RequestPool, when set, serves every other request (jobs, runs,
	// executions, keys, classes, history, authentication): a pool of their
	// own, so requests do not queue behind the engine's transactions when
	// a burst of work holds all of Pool. Nil: Pool.
	RequestPool *pgxpool.Pool
	// Logger receives request and change logs. Defaults to discarding.
	Logger *slog.Logger
	// Version of the build, reported by /healthz and /readyz.
	Version string
	// Metrics counts fires, dispatches and results. Nil: unregistered.
	Metrics *metrics.Metrics
	// Notifier wakes long-polling lease requests (nil makes them poll) and
	// tells the key cache of revocations; it must listen on
	// notify.APIKeyRevokedChannel for that (else revoked keys work on for
	// up to 2 s).
	Notifier *notify.Notifier
	// Agent tunes the agent protocol (lease length, heartbeat interval).
	Agent dispatch.AgentConfig
	// Router places the tasks of manual runs; nil leaves them unassigned.
	Router *dispatch.TaskRouter
	// Ready reports whether this replica can serve (database reachable,
	// migrations current). Nil means always ready. /readyz shows the
	// Reason of a *NotReadyError and logs the rest.
	Ready func(ctx context.Context) error
	// Outbox enqueues callbacks and agentless HTTP tasks in the
	// transactions of API calls; nil: none (a replica running River
	// enqueues callbacks later; agentless tasks wait for one).
	Outbox *delivery.Outbox
	// Clock, when set, is the time the agent protocol leases and renews
	// by (tests that move time forward, sharing it with their Reaper);
	// nil: the database's now().
	Clock *clock.Clock
	// Outbound is what callback and HTTP-job URLs may reach, checked when
	// a job is saved (and again by the senders at every connection). The
	// zero policy allows public addresses only.
	Outbound outbound.Policy
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
	// declarations, agents' results) may take. Defaults to
	// DefaultBodyMemoryBudget (64 MiB); negative: no budget.
	BodyMemoryBudget int64
	// MetricsHandler, when set, is served at GET /metrics (Prometheus).
	MetricsHandler http.Handler
	// MetricsAuth makes /metrics require an API key with scope read.
	MetricsAuth bool
	// PublicURL is where targets of HTTP jobs reach this API: the
	// completion URL of the HTTP tasks leased to agents is on it (ax
	// serve's own requests take theirs from delivery.HTTPTaskConfig, set
	// to the same). Empty: agents' HTTP tasks carry no completion URL.
	PublicURL string
}

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
	requests := cmp.Or(cfg.RequestPool, cfg.Pool)
	mux := http.NewServeMux()
	api := humago.New(mux, apiConfig(cfg.Logger))
	keys := queue.NewKeyService(requests)
	auth := &authenticator{keys: keys, signing: queue.NewSigningKeyService(requests), api: api, logger: cfg.Logger}
	if cfg.Notifier != nil {
		// Never unsubscribed: the subscription lives as long as the API.
		auth.cache.revoked, _ = cfg.Notifier.Subscribe(notify.APIKeyRevokedChannel)
	}
	idem := &idempotency{store: queue.NewIdempotencyStore(requests), api: api, logger: cfg.Logger}
	api.UseMiddleware(auth.middleware, storableBodies(api), idem.middleware)

	jobSvc := queue.NewJobService(requests, cfg.Logger)
	execSvc := queue.NewExecutionService(requests, cfg.Logger, cfg.Metrics).WithRouter(cfg.Router).WithOutbox(cfg.Outbox)
	callbacks := delivery.NewCallbackService(requests, cfg.Outbox, cfg.Logger)
	urls := &urlChecker{policy: cfg.Outbound, logger: cfg.Logger}
	guard := groupGuard{jobs: jobSvc, execs: execSvc}
	jobs := &jobHandlers{jobs: jobSvc, urls: urls, guard: guard}
	jobs.register(api)
	(&declarationHandlers{decls: queue.NewDeclarationService(requests, cfg.Logger, cfg.Metrics), urls: urls}).register(api)
	(&executionHandlers{execs: execSvc, waiter: queue.NewExecutionWaiter(requests, cfg.Notifier), callbacks: callbacks,
		guard: guard}).register(api)
	(&outboundHandlers{jobs: jobSvc, execs: execSvc, callbacks: callbacks, urls: urls, logger: cfg.Logger, guard: guard,
		completer: delivery.NewTaskCompleter(cfg.Pool, cfg.Outbox, cfg.Logger, cfg.Metrics)}).register(api)
	(&agentHandlers{keys: keys, agents: dispatch.NewLeaseBroker(cfg.Pool, cfg.Notifier, cfg.Agent, cfg.Logger, cfg.Metrics).WithOutbox(cfg.Outbox).WithClock(cfg.Clock),
		publicURL: cfg.PublicURL, forgetKey: auth.cache.forget}).register(api)
	(&keyHandlers{keys: keys, signing: auth.signing, forgetKeys: auth.cache.forgetAll}).register(api)
	(&classHandlers{classes: queue.NewClassService(requests, cfg.Logger)}).register(api)
	(&historyHandlers{history: queue.NewHistoryService(requests)}).register(api)
	registerCronPreview(api)
	(&healthHandlers{version: cfg.Version, ready: cfg.Ready, logger: cfg.Logger}).register(api)
	registerPatches(api)
	registerCallbackWebhook(api)
	registerHTTPTaskWebhook(api)
	mux.Handle("GET /docs", docsHandler(api))
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
