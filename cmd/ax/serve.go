package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/openapi"
	"github.com/ax-scheduler/ax/queue"
)

// serveConfig is what `ax serve` needs; flags and AX_ variables map onto it.
type serveConfig struct {
	Addr        string // listen address; AX_ADDR, default 127.0.0.1:8080
	DatabaseURL string // DATABASE_URL
	NoMigrate   bool   // skip migrations at start (another process runs them)
	AdminKey    string // AX_ADMIN_KEY: installed as an admin key at start
	// Agent is the agent protocol's timing: Lease (AX_LEASE, default 30 s)
	// is how long a lease lasts without renewal, HeartbeatInterval
	// (AX_HEARTBEAT_INTERVAL, default 5 s) how often agents are asked to
	// heartbeat; an agent silent for 3 intervals is offline.
	Agent queue.AgentConfig
	// Outbound is what callbacks and agentless HTTP jobs may reach.
	Outbound outboundConfig
	// Ready, when set, is called with the bound address once serving.
	Ready func(addr string)
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax serve", flag.ContinueOnError)
	cfg := serveConfig{}
	fs.StringVar(&cfg.Addr, "addr", envOr("AX_ADDR", "127.0.0.1:8080"), "listen address (AX_ADDR)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", envOr("DATABASE_URL", ""), "Postgres URL (DATABASE_URL)")
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
	errOutbound := addOutboundFlags(fs, &cfg.Outbound)
	if err := errors.Join(errLease, errHeartbeat, errSteal, errProbe, errOutbound); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := validateAgentTiming(cfg.Agent); err != nil {
		return err
	}
	cfg.AdminKey = envOr("AX_ADMIN_KEY", "")
	if cfg.DatabaseURL == "" {
		return errors.New("no database: set DATABASE_URL or --database-url (or use `ax dev` for a local one)")
	}
	return serve(ctx, newLogger(), cfg)
}

// serve runs one replica until ctx ends, then shuts down gracefully.
func serve(ctx context.Context, logger *slog.Logger, cfg serveConfig) error {
	pool, err := db.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if !cfg.NoMigrate {
		if err := db.Migrate(ctx, pool, logger); err != nil {
			return err
		}
	}
	if cfg.AdminKey != "" {
		if err := openapi.EnsureAPIKey(ctx, pool, "bootstrap-admin", cfg.AdminKey, []string{openapi.ScopeAdmin}); err != nil {
			return err
		}
	}
	metrics := queue.NewMetrics(prometheus.DefaultRegisterer)
	notifier := queue.NewNotifier(pool, logger, queue.JobChangedChannel, queue.TaskReadyChannel, queue.ExecutionEndedChannel,
		queue.APIKeyRevokedChannel)
	river, err := startRiver(ctx, pool, logger, metrics, cfg)
	if err != nil {
		return err
	}
	defer river.Stop()
	agentCfg := cfg.Agent
	router, err := queue.NewTaskRouter(pool, agentCfg, queue.TaskRouterConfig{}, logger, metrics)
	if err != nil {
		return err
	}
	triggers := queue.NewTriggerLoop(pool, notifier, queue.TriggerLoopConfig{Logger: logger, Metrics: metrics, Router: router,
		Outbox: river.Outbox()})
	reaper := queue.NewReaper(pool, agentCfg, queue.ReaperConfig{Logger: logger, Metrics: metrics, Outbox: river.Outbox()})
	prometheus.MustRegister(queue.NewStateCollector(pool))
	for _, svc := range []interface{ Start(context.Context) error }{notifier, triggers, reaper} {
		if err := svc.Start(ctx); err != nil {
			return err
		}
	}
	defer notifier.Stop()
	defer triggers.Stop()
	defer reaper.Stop()

	apiHandler, _ := openapi.New(openapi.Config{
		Pool: pool, Logger: logger, Version: version, Ready: readiness(pool), Metrics: metrics,
		Notifier: notifier, Agent: agentCfg, Router: router, Outbox: river.Outbox(), Outbound: cfg.Outbound.policy(),
	})
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.Handler())
	mux.Handle("/", apiHandler)
	return listenAndServe(ctx, logger, cfg, openapi.LogRequests(logger, mux))
}

func listenAndServe(ctx context.Context, logger *slog.Logger, cfg serveConfig, h http.Handler) error {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("error listening on %s: %w", cfg.Addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.InfoContext(ctx, "ax serving", "addr", ln.Addr().String(), "version", version)
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

// validateAgentTiming checks what agents are told at registration: whole
// seconds (the protocol carries seconds), and a heartbeat interval short
// enough that a lease survives a missed heartbeat.
func validateAgentTiming(c queue.AgentConfig) error {
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
func readiness(pool *pgxpool.Pool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if err := pool.Ping(ctx); err != nil {
			return fmt.Errorf("database unreachable: %w", err)
		}
		m, err := db.NewMigrator(pool, nil)
		if err != nil {
			return err
		}
		defer m.Close()
		pending, err := m.HasPending(ctx)
		if err != nil {
			return err
		}
		if pending {
			return errors.New("database schema is behind this binary: run `ax migrate up`")
		}
		return nil
	}
}
