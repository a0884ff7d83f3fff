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
	// Ready, when set, is called with the bound address once serving.
	Ready func(addr string)
}

func runServe(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax serve", flag.ContinueOnError)
	cfg := serveConfig{}
	fs.StringVar(&cfg.Addr, "addr", envOr("AX_ADDR", "127.0.0.1:8080"), "listen address (AX_ADDR)")
	fs.StringVar(&cfg.DatabaseURL, "database-url", envOr("DATABASE_URL", ""), "Postgres URL (DATABASE_URL)")
	fs.BoolVar(&cfg.NoMigrate, "no-migrate", false, "do not apply migrations at start")
	if err := fs.Parse(args); err != nil {
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
	notifier := queue.NewNotifier(pool, logger, queue.JobChangedChannel, queue.TaskReadyChannel)
	triggers := queue.NewTriggerLoop(pool, notifier, queue.TriggerLoopConfig{Logger: logger, Metrics: metrics})
	agentCfg := queue.AgentConfig{}
	reaper := queue.NewReaper(pool, agentCfg, queue.ReaperConfig{Logger: logger, Metrics: metrics})
	prometheus.MustRegister(queue.NewQueueCollector(pool))
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
		Notifier: notifier, Agent: agentCfg,
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
