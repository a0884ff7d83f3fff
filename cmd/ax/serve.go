package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/openapi/console"
	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
	"github.com/ax-scheduler/ax/queue/dispatch"
	"github.com/ax-scheduler/ax/queue/history"
	"github.com/ax-scheduler/ax/queue/metrics"
	"github.com/ax-scheduler/ax/queue/notify"
	"github.com/ax-scheduler/ax/queue/runlog"
	"github.com/ax-scheduler/ax/queue/schedule"
	"github.com/ax-scheduler/ax/queue/vacuum"
)

// serveConfig is what `ax serve` needs; flags and AX_ variables map onto it.
type serveConfig struct {
	Addr        string // listen address; AX_ADDR, default 127.0.0.1:8080
	DatabaseURL string // DATABASE_URL
	// DirectDatabaseURL (AX_DIRECT_DATABASE_URL) is a connection to the
	// database itself for what a transaction pooler at DatabaseURL cannot
	// carry: LISTEN, migrations under a session lock, retention's
	// detaches. Empty: DatabaseURL; behind a transaction pooler the
	// replica then polls instead of listening (see the managed Postgres
	// guide).
	DirectDatabaseURL string
	NoMigrate         bool   // skip migrations at start (another process runs them)
	AdminKey          string // AX_ADMIN_KEY: installed as an admin key at start
	// Agent is the agent protocol's timing: Lease (AX_LEASE, default 30 s)
	// is how long a lease lasts without renewal, HeartbeatInterval
	// (AX_HEARTBEAT_INTERVAL, default 5 s) how often agents are asked to
	// heartbeat; an agent silent for 3 intervals is offline.
	Agent dispatch.AgentConfig
	// MisfireThreshold (AX_MISFIRE_THRESHOLD, default 5 s) is how late a
	// tick or delayed run may fire and still be on time; later ones follow
	// the job's misfire policy.
	MisfireThreshold time.Duration
	// MaxLostLeases (AX_MAX_LOST_LEASES, default 3) is how many times a
	// task may lose its lease with its agent before it fails as lost;
	// until then it runs again without using up an attempt.
	MaxLostLeases int
	// TimeoutGrace (AX_TIMEOUT_GRACE, default 10 s) is how long past its
	// timeout a task an agent holds is left to the agent, which stops it
	// and reports timed_out, before the reaper times it out.
	TimeoutGrace time.Duration
	// Health is how agents are judged for routing: least_active's duration
	// window and the error share that quarantines.
	Health healthConfig
	// Outbound is what callbacks and agentless HTTP jobs may reach.
	Outbound outboundConfig
	// ReadTimeout (AX_READ_TIMEOUT, default 30 s) bounds reading a
	// request's headers and body. Bodies have shorter deadlines of their
	// own (10 s, or ReadTimeout when shorter, from the start of the
	// request; 5 s once an operation reads it), except bodies of megabytes:
	// 30 s once read, whatever ReadTimeout says (see the README). Long
	// polls are not cut by it: they wait after their request is read.
	ReadTimeout time.Duration
	// BodyMemoryBudget (AX_BODY_MEMORY_BUDGET, default 64 MiB) is how many
	// bytes of request bodies the replica serves at once; a request whose
	// body would pass it is refused with 503 and Retry-After before it is
	// read. At least 8 MiB (the largest body); -1: no budget.
	BodyMemoryBudget int64
	// TLSCert and TLSKey (AX_TLS_CERT, AX_TLS_KEY) are PEM files: with
	// both, the API is served over HTTPS. Without, plain HTTP, for
	// loopback or behind a TLS-terminating proxy.
	TLSCert, TLSKey string
	// TrustedProxies (AX_TRUSTED_PROXIES, comma-separated CIDRs or
	// addresses) are the TLS-terminating proxies in front of ax whose
	// X-Forwarded-Proto: https is believed: the console's session cookie
	// is then marked Secure. Empty (the default): only ax's own TLS counts.
	TrustedProxies []netip.Prefix
	// History is the retention of finished runs (AX_HISTORY_RETENTION,
	// default 7 days; AX_HISTORY_FAILED_RETENTION, default 30 days) and
	// the time range of one history partition (AX_HISTORY_PARTITION_WIDTH,
	// default a day; seconds in tests).
	History history.Config
	// PoolMaxConns (AX_DB_MAX_CONNS) and PoolMinConns (AX_DB_MIN_CONNS)
	// size the replica's database pool; 0 keeps the URL's pool_max_conns
	// and pool_min_conns, or the defaults (db.DefaultMaxConns, 5, the
	// notifier's connection included, whatever the host's CPUs; none
	// kept idle). The managed Postgres guide has the sizing rule.
	PoolMaxConns, PoolMinConns int
	// PoolRequestConns (AX_DB_REQUEST_CONNS) sizes the second pool, which
	// serves API requests other than agents' (jobs, runs, executions,
	// keys, history…), so they never queue behind the engine's
	// transactions; 0: 2.
	PoolRequestConns int
	// MetricsAuth (AX_METRICS_AUTH) makes /metrics require an API key
	// with scope read. Off by default (Prometheus scrapes it openly).
	MetricsAuth bool
	// Ready, when set, is called with the bound address once serving.
	Ready func(addr string)
}

func newServeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "serve", Short: "Run an ax server replica (DATABASE_URL)", Args: noArgs,
		Long: "Run an ax server replica: the API, the console, the trigger loop, the lease broker and,\n" +
			"on the elected leader, maintenance. Flags default to their AX_… environment variables.",
	}
	fs := flag.NewFlagSet("ax serve", flag.ContinueOnError)
	cfg := &serveConfig{}
	envErr := addServeFlags(fs, cfg)
	cmd.Flags().AddGoFlagSet(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if envErr != nil {
			return envErr
		}
		return runServe(cmd.Context(), *cfg)
	}
	return cmd
}

// addServeFlags registers the flags of ax serve on fs, their defaults
// from the environment; the error names an unreadable variable.
func addServeFlags(fs *flag.FlagSet, cfg *serveConfig) error {
	fs.StringVar(&cfg.Addr, "addr", envOr("AX_ADDR", "127.0.0.1:8080"), "listen address (AX_ADDR)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", envOr("DATABASE_URL", ""), "Postgres URL (DATABASE_URL)")
	fs.StringVar(&cfg.DirectDatabaseURL, "direct-database-url", envOr("AX_DIRECT_DATABASE_URL", ""),
		"Postgres URL of the database itself, when DATABASE_URL is a transaction pooler: LISTEN, migrations and retention's detaches use it (AX_DIRECT_DATABASE_URL)")
	fs.BoolVar(&cfg.NoMigrate, "no-migrate", false, "do not apply migrations at start")
	lease, errLease := envDuration("AX_LEASE", 30*time.Second)
	heartbeat, errHeartbeat := envDuration("AX_HEARTBEAT_INTERVAL", 5*time.Second)
	steal, errSteal := envDuration("AX_STEAL_AFTER", 2*time.Second)
	probe, errProbe := envDuration("AX_PROBE_EVERY", 5*time.Second)
	fs.DurationVar(&cfg.Agent.StealAfter, "steal-after", steal,
		"how long a task routed to a busy or dead agent waits before another takes it (AX_STEAL_AFTER)")
	fs.DurationVar(&cfg.Agent.ProbeEvery, "probe-every", probe,
		"how often a quarantined agent gets one task to prove itself (AX_PROBE_EVERY)")
	fs.DurationVar(&cfg.Agent.Lease, "lease", lease, "how long a task lease lasts without a heartbeat, whole seconds (AX_LEASE)")
	fs.DurationVar(&cfg.Agent.HeartbeatInterval, "heartbeat-interval", heartbeat,
		"how often agents heartbeat, whole seconds, well under the lease (AX_HEARTBEAT_INTERVAL)")
	misfire, errMisfire := envDuration("AX_MISFIRE_THRESHOLD", 5*time.Second)
	fs.DurationVar(&cfg.MisfireThreshold, "misfire-threshold", misfire,
		"how late a tick or delayed run may fire and still be on time; later ones follow the job's misfire policy (AX_MISFIRE_THRESHOLD)")
	logCap, errLogCap := envInt64("AX_MAX_TASK_LOG_BYTES", dispatch.DefaultMaxTaskLogBytes)
	fs.Int64Var(&cfg.Agent.MaxTaskLogBytes, "max-task-log-bytes", logCap,
		"output stored per task, every attempt counted; the rest is dropped and marked once (AX_MAX_TASK_LOG_BYTES)")
	maxLost, errMaxLost := envInt64("AX_MAX_LOST_LEASES", dispatch.DefaultMaxLostLeases)
	fs.IntVar(&cfg.MaxLostLeases, "max-lost-leases", int(maxLost),
		"leases a task may lose with its agent (each run again without using up an attempt) before it fails as lost (AX_MAX_LOST_LEASES)")
	grace, errGrace := envDuration("AX_TIMEOUT_GRACE", dispatch.DefaultTimeoutGrace)
	fs.DurationVar(&cfg.TimeoutGrace, "timeout-grace", grace,
		"how long past its timeout a task an agent holds is left to the agent to stop and report before the reaper times it out; at least the agents' kill grace (AX_TIMEOUT_GRACE)")
	errHistory := addHistoryFlags(fs, &cfg.History)
	errOutbound := addOutboundFlags(fs, &cfg.Outbound)
	errTransport := addTransportFlags(fs, cfg)
	errPool := addPoolFlags(fs, cfg)
	errHealth := addHealthFlags(fs, cfg)
	return errors.Join(errLease, errHeartbeat, errSteal, errProbe, errMisfire, errLogCap, errMaxLost, errGrace, errHistory,
		errOutbound, errTransport, errPool, errHealth)
}

// runServe checks cfg and serves until ctx ends.
func runServe(ctx context.Context, cfg serveConfig) error {
	if err := errors.Join(validateAgentTiming(cfg.Agent), validateTransport(cfg), validatePool(cfg), validateHealth(cfg),
		cfg.History.Validate()); err != nil {
		return err
	}
	if cfg.MisfireThreshold < time.Second || cfg.MisfireThreshold > time.Hour {
		return fmt.Errorf("misfire threshold %s must be from 1s to 1h", cfg.MisfireThreshold)
	}
	if cfg.MaxLostLeases < 1 || cfg.MaxLostLeases > 100 {
		return fmt.Errorf("max lost leases %d must be from 1 to 100", cfg.MaxLostLeases)
	}
	if cfg.TimeoutGrace < 0 || cfg.TimeoutGrace > time.Hour {
		return fmt.Errorf("timeout grace %s must be from 0s to 1h", cfg.TimeoutGrace)
	}
	if cfg.Agent.MaxTaskLogBytes < 1 {
		return fmt.Errorf("max task log bytes %d must be at least 1", cfg.Agent.MaxTaskLogBytes)
	}
	cfg.AdminKey = envOr("AX_ADMIN_KEY", "")
	if cfg.DatabaseURL == "" {
		return errors.New("no database: set DATABASE_URL or --database-url (or use `ax dev` for a local one)")
	}
	return serve(ctx, newLogger(false), cfg)
}

// serve runs one replica until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, logger *slog.Logger, cfg serveConfig) error {
	// Listening first: a taken port fails the start at once, and the
	// address bound (a port of 0 is the kernel's pick) is the one the
	// public URL names, which HTTP tasks' completion links carry.
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", cfg.Addr, err)
	}
	defer ln.Close()
	cfg.Addr = ln.Addr().String()
	conns, err := openServeDatabase(ctx, logger, cfg)
	if err != nil {
		return err
	}
	defer conns.Close()
	pool, requestPool := conns.engine, conns.requests
	if n := pool.Config().MaxConns; n < 2 {
		return fmt.Errorf("db max conns %d is too few: the notifier holds one to listen, and the work needs another", n)
	}
	if !cfg.NoMigrate {
		if err := conns.migrate(ctx, logger); err != nil {
			return err
		}
	}
	cfg.History.Direct = conns.direct
	cfg.History.Logger = logger
	if err := history.Apply(ctx, pool, cfg.History); err != nil {
		return err
	}
	if cfg.AdminKey != "" {
		if err := queue.NewKeyService(pool).Ensure(ctx, "bootstrap-admin", cfg.AdminKey, []string{queue.ScopeAdmin}); err != nil {
			return err
		}
	}
	m := metrics.New(prometheus.DefaultRegisterer)
	cfg.History.Dropped = m.HistoryRowsDropped
	cfg.History.NotOwner = m.HistoryMaintenanceDenied
	notifier := notify.NewNotifierWith(pool, notify.NotifierConfig{Logger: logger, DirectURL: cfg.DirectDatabaseURL,
		NoDelivery: conns.behindPooler && cfg.DirectDatabaseURL == "", Lost: m.NotificationsLost}, notify.ServeChannels()...)
	river, err := startRiver(ctx, pool, logger, m, cfg, conns.behindPooler)
	if err != nil {
		return err
	}
	defer river.Stop()
	agentCfg := cfg.Agent
	router, err := dispatch.NewTaskRouter(agentCfg, dispatch.TaskRouterConfig{DurationWindow: cfg.Health.DurationWindow},
		logger, m)
	if err != nil {
		return err
	}
	triggers := schedule.NewTriggerLoop(pool, notifier, schedule.TriggerLoopConfig{Logger: logger, Metrics: m, Router: router,
		Outbox: river.Outbox(), MisfireThreshold: cfg.MisfireThreshold})
	reaper := dispatch.NewReaper(pool, agentCfg, dispatch.ReaperConfig{Logger: logger, Metrics: m, Outbox: river.Outbox(),
		MaxLostLeases: cfg.MaxLostLeases, TimeoutGrace: cmp.Or(cfg.TimeoutGrace, -1), HealthEvery: cfg.Health.CheckEvery,
		Quarantine: axtype.QuarantinePolicy{ErrorShare: cfg.Health.ErrorShare, ErrorCodes: cfg.Health.ErrorCodes}})
	prometheus.MustRegister(metrics.NewStateCollector(pool), metrics.NewPoolCollector(pool, "engine"),
		metrics.NewPoolCollector(requestPool, "requests"))
	vacuumer := vacuum.New(pool, vacuum.Config{Logger: logger, Metrics: m})
	upcoming := schedule.NewUpcoming(pool, notifier, schedule.UpcomingConfig{Logger: logger})
	backfills := schedule.NewBackfillReleaser(pool, notifier, schedule.BackfillReleaserConfig{Logger: logger, Metrics: m,
		Router: router, Outbox: river.Outbox()})
	afterFirer := schedule.NewAfterFirer(pool, notifier, schedule.AfterFirerConfig{Logger: logger, Metrics: m,
		Router: router, Outbox: river.Outbox()})
	services := []interface{ Start(context.Context) error }{notifier, triggers, reaper, vacuumer, upcoming, backfills, afterFirer}
	var runLogger *runlog.RunLogger
	if sessions := conns.sessionPool(); sessions != nil {
		runLogger = runlog.NewRunLogger(sessions, notifier, runlog.RunLoggerConfig{Logger: logger})
		services = append(services, runLogger)
	} else {
		// Run-end lines come from notifications and one replica's session
		// lock: behind a transaction pooler both need the direct URL.
		logger.WarnContext(ctx, "no run-end log lines: behind a transaction pooler they need AX_DIRECT_DATABASE_URL")
	}
	for _, svc := range services {
		if err := svc.Start(ctx); err != nil {
			return err
		}
	}
	defer notifier.Stop()
	defer triggers.Stop()
	defer reaper.Stop()
	defer vacuumer.Stop()
	defer upcoming.Stop()
	defer backfills.Stop()
	defer afterFirer.Stop()
	defer runLogger.Stop()

	// The engine's services, built once: the API and the console share them.
	engine := queue.NewEngine(queue.EngineConfig{Pool: pool, RequestPool: requestPool, Logger: logger, Metrics: m,
		Notifier: notifier, Agent: agentCfg, Router: router, Outbox: river.Outbox()})
	apiHandler, _ := openapi.New(openapi.Config{
		Engine: engine, Logger: logger, Version: version, Ready: readiness(pool, conns.behindPooler), Outbound: cfg.Outbound.policy(),
		Degraded:       func() []string { return nonEmpty(notifier.Degraded()) },
		MetricsHandler: metricsHandler(logger), MetricsAuth: cfg.MetricsAuth, PublicURL: cfg.publicURL(),
		BodyReadTimeout:  min(cmp.Or(cfg.ReadTimeout, 30*time.Second), 10*time.Second),
		BodyMemoryBudget: cfg.BodyMemoryBudget,
		// Twice as many calls at once as the request pool has
		// connections; the rest wait their key's turn, not behind one
		// key's flood.
		RequestTurns: openapi.TurnsFor(int(requestPool.Config().MaxConns)), Turns: m,
	})
	ui, err := console.New(console.Config{API: apiHandler, Keys: engine.Keys, Overview: engine.Overview, Logger: logger,
		TrustedProxies: cfg.TrustedProxies})
	if err != nil {
		return err
	}
	return serveOn(ctx, logger, cfg, ln, openapi.LogRequests(logger, withConsole(apiHandler, ui)))
}

// withConsole serves the web console at /ui and the API everywhere else,
// on the same listener.
func withConsole(api, ui http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(console.Prefix+"/", ui)
	mux.Handle("GET "+console.Prefix, http.RedirectHandler(console.Prefix+"/", http.StatusMovedPermanently))
	mux.Handle("/", api)
	return mux
}

// metricsHandler serves the default registry. A collector that fails (the
// state gauges when the database is slow or the pool exhausted) leaves its
// series out and is logged, and the rest is still served: the pool gauges
// matter most exactly then.
func metricsHandler(logger *slog.Logger) http.Handler {
	return promhttp.InstrumentMetricHandler(prometheus.DefaultRegisterer,
		promhttp.HandlerFor(prometheus.DefaultGatherer, promhttp.HandlerOpts{
			ErrorHandling: promhttp.ContinueOnError,
			ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}))
}

// serveOn serves h on ln until ctx ends.
func serveOn(ctx context.Context, logger *slog.Logger, cfg serveConfig, ln net.Listener, h http.Handler) error {
	// No WriteTimeout: lease and execution long polls answer after up to
	// 25 s and 60 s; a client that stops reading is bounded by TCP.
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: cmp.Or(cfg.ReadTimeout, 30*time.Second),
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() {
		if cfg.TLSCert != "" {
			errc <- srv.ServeTLS(ln, cfg.TLSCert, cfg.TLSKey)
			return
		}
		errc <- srv.Serve(ln)
	}()
	logger.InfoContext(ctx, "ax serving", "addr", ln.Addr().String(), "tls", cfg.TLSCert != "", "version", version)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr().String())
	}
	select {
	case err := <-errc:
		return fmt.Errorf("error serving: %w", err)
	case <-ctx.Done():
	}
	logger.Info("ax shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// envDuration reads a duration such as 30s from the environment.
func envDuration(name string, fallback time.Duration) (time.Duration, error) {
	s := envOr(name, "")
	if s == "" {
		return fallback, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fallback, fmt.Errorf("%s=%q is not a duration such as 30s", name, s)
	}
	return d, nil
}

// envInt64 reads a whole number from the environment.
func envInt64(name string, fallback int64) (int64, error) {
	s := envOr(name, "")
	if s == "" {
		return fallback, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fallback, fmt.Errorf("%s=%q is not a whole number", name, s)
	}
	return n, nil
}

// validateAgentTiming checks what agents are told at registration: whole
// seconds (the protocol carries seconds), and a heartbeat interval short
// enough that a lease survives a missed heartbeat.
func validateAgentTiming(c dispatch.AgentConfig) error {
	var errs []error
	for name, d := range map[string]time.Duration{"lease": c.Lease, "heartbeat interval": c.HeartbeatInterval} {
		if d < time.Second || d%time.Second != 0 {
			errs = append(errs, fmt.Errorf("%s %s is not a whole number of seconds of at least 1 s", name, d))
		}
	}
	if c.HeartbeatInterval*2 > c.Lease {
		errs = append(errs, fmt.Errorf("heartbeat interval %s is more than half the lease %s: a lease would expire after one missed heartbeat",
			c.HeartbeatInterval, c.Lease))
	}
	return errors.Join(errs...)
}

// readiness checks that the database answers and has every migration this
// binary knows.
func readiness(pool *pgxpool.Pool, behindPooler bool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			return &openapi.NotReadyError{Reason: "database unreachable", Err: err}
		}
		m, err := db.NewMigratorWith(pool, db.MigratorOptions{BehindPooler: behindPooler})
		if err != nil {
			return &openapi.NotReadyError{Reason: "cannot read the schema version", Err: err}
		}
		defer m.Close()
		pending, err := m.HasPending(ctx)
		if err != nil {
			return &openapi.NotReadyError{Reason: "cannot read the schema version", Err: err}
		}
		if pending {
			return &openapi.NotReadyError{Reason: "database schema is behind this binary: run `ax migrate up`"}
		}
		return nil
	}
}

func addTransportFlags(fs *flag.FlagSet, c *serveConfig) error {
	read, errRead := envDuration("AX_READ_TIMEOUT", 30*time.Second)
	metricsAuth, errMetrics := envBool("AX_METRICS_AUTH")
	budget, errBudget := envInt64("AX_BODY_MEMORY_BUDGET", openapi.DefaultBodyMemoryBudget)
	fs.Int64Var(&c.BodyMemoryBudget, "body-memory-budget", budget,
		"bytes of request bodies served at once; past it a request is refused with 503 and Retry-After before its body is read; at least 8 MiB, -1 for none (AX_BODY_MEMORY_BUDGET)")
	fs.DurationVar(&c.ReadTimeout, "read-timeout", read,
		"how long reading one request (headers and body) may take; bodies of megabytes (agent protocol, run batches, declarations) get 30 s once read, long polls are not cut by it (AX_READ_TIMEOUT)")
	fs.StringVar(&c.TLSCert, "tls-cert", envOr("AX_TLS_CERT", ""),
		"PEM certificate (chain) to serve HTTPS with; needs --tls-key (AX_TLS_CERT)")
	fs.StringVar(&c.TLSKey, "tls-key", envOr("AX_TLS_KEY", ""), "PEM private key of --tls-cert (AX_TLS_KEY)")
	fs.BoolVar(&c.MetricsAuth, "metrics-key-required", metricsAuth,
		"require an API key with scope read on /metrics (AX_METRICS_AUTH)")
	proxies, errProxies := parseTrustedProxies(envOr("AX_TRUSTED_PROXIES", ""))
	c.TrustedProxies = proxies
	fs.Func("trusted-proxies", "comma-separated CIDRs or addresses of TLS-terminating proxies whose X-Forwarded-Proto: https is believed, so console cookies are Secure behind them (AX_TRUSTED_PROXIES)",
		func(v string) (err error) {
			c.TrustedProxies, err = parseTrustedProxies(v)
			return err
		})
	return errors.Join(errRead, errMetrics, errBudget, errProxies)
}

// parseTrustedProxies reads "10.0.0.0/8, 192.0.2.7, ::1": CIDRs or single
// addresses.
func parseTrustedProxies(v string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: not an address or CIDR", f)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// validateTransport checks the TLS files (both or neither, readable) and
// the read timeout.
func validateTransport(c serveConfig) error {
	var errs []error
	if (c.TLSCert == "") != (c.TLSKey == "") {
		errs = append(errs, errors.New("--tls-cert and --tls-key go together: give both or neither"))
	}
	for _, f := range []string{c.TLSCert, c.TLSKey} {
		if f == "" {
			continue
		}
		if _, err := os.Stat(f); err != nil {
			errs = append(errs, fmt.Errorf("TLS file: %w", err))
		}
	}
	if c.ReadTimeout < time.Second {
		errs = append(errs, fmt.Errorf("read timeout %s is under 1 s", c.ReadTimeout))
	}
	if b := c.BodyMemoryBudget; b != -1 && b < openapi.MinBodyMemoryBudget {
		errs = append(errs, fmt.Errorf("body memory budget %d is under %d bytes (the largest body; -1 for no budget)",
			b, openapi.MinBodyMemoryBudget))
	}
	return errors.Join(errs...)
}

// defaultRequestConns sizes the request pool: two, so a slow request (a
// large history page) leaves one for the others.
const defaultRequestConns = 2

func addPoolFlags(fs *flag.FlagSet, c *serveConfig) error {
	maxConns, errMax := envInt("AX_DB_MAX_CONNS")
	minConns, errMin := envInt("AX_DB_MIN_CONNS")
	requestConns, errRequest := envInt("AX_DB_REQUEST_CONNS")
	fs.IntVar(&c.PoolMaxConns, "db-max-conns", maxConns,
		"most database connections the engine's pool opens (fires, agents' leases and results, maintenance), its notifier's included (River's listener is apart); 0: the URL's pool_max_conns, else 5, whatever the host's CPUs (AX_DB_MAX_CONNS)")
	fs.IntVar(&c.PoolMinConns, "db-min-conns", minConns,
		"database connections the engine's pool keeps open while idle; 0: the URL's pool_min_conns, else none (AX_DB_MIN_CONNS)")
	fs.IntVar(&c.PoolRequestConns, "db-request-conns", requestConns,
		"most database connections of the second pool, which serves API requests other than agents' so they never wait for the engine's; 0: 2 (AX_DB_REQUEST_CONNS)")
	return errors.Join(errMax, errMin, errRequest)
}

// validatePool bounds the pool flags; OpenPool checks them against what
// the URL says.
func validatePool(c serveConfig) error {
	var errs []error
	if c.PoolMaxConns < 0 || c.PoolMaxConns > db.MaxPoolConns {
		errs = append(errs, fmt.Errorf("db max conns %d is not between 1 and %d (0: the default)", c.PoolMaxConns, db.MaxPoolConns))
	}
	if c.PoolMinConns < 0 || c.PoolMinConns > db.MaxPoolConns {
		errs = append(errs, fmt.Errorf("db min conns %d is not between 0 and %d", c.PoolMinConns, db.MaxPoolConns))
	}
	if c.PoolRequestConns < 0 || c.PoolRequestConns > db.MaxPoolConns {
		errs = append(errs, fmt.Errorf("db request conns %d is not between 1 and %d (0: the default)", c.PoolRequestConns, db.MaxPoolConns))
	}
	if c.PoolMaxConns > 0 && c.PoolMinConns > c.PoolMaxConns {
		errs = append(errs, fmt.Errorf("db min conns %d is more than db max conns %d", c.PoolMinConns, c.PoolMaxConns))
	}
	return errors.Join(errs...)
}
