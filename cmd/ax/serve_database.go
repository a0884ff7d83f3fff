package main

import (
	"cmp"
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
)

// serveDatabase is a replica's ways to Postgres: the engine's and the
// requests' pools at DATABASE_URL, and a small pool at the direct URL
// when one is given.
type serveDatabase struct {
	engine, requests *pgxpool.Pool
	// direct is nil without AX_DIRECT_DATABASE_URL.
	direct *pgxpool.Pool
	// behindPooler: DATABASE_URL leads to a transaction-mode pooler.
	behindPooler bool
}

// directConns sizes the direct pool: migrations and retention's detaches,
// one at a time each, and the run logger's session lock and reads (the
// notifier's direct connection is its own).
const directConns = 3

// sessionPool is where session state may live (the run logger's advisory
// lock): the direct pool, else the engine's unless it goes through a
// transaction pooler, where a session lock would stay on a server
// connection other clients get next. Nil: nowhere.
func (d *serveDatabase) sessionPool() *pgxpool.Pool {
	if d.direct != nil {
		return d.direct
	}
	if d.behindPooler {
		return nil
	}
	return d.engine
}

// openServeDatabase waits for the database to take connections (a full
// server during a deploy is waited for, and logged, not a reason to
// exit), finds out whether DATABASE_URL is a transaction pooler, and
// opens the pools accordingly.
func openServeDatabase(ctx context.Context, logger *slog.Logger, cfg serveConfig) (*serveDatabase, error) {
	behindPooler, err := db.DetectTransactionPooler(ctx, cfg.DatabaseURL, logger)
	if err != nil {
		return nil, err
	}
	if behindPooler {
		logger.InfoContext(ctx, "DATABASE_URL leads to a transaction pooler: no session settings at connect, no prepared statements",
			"direct_database_url", cfg.DirectDatabaseURL != "")
	}
	out := &serveDatabase{behindPooler: behindPooler}
	open := func(url, name string, size db.PoolSize, pooled bool) (*pgxpool.Pool, error) {
		return db.OpenPoolWith(ctx, url, db.PoolOptions{Size: size, BehindPooler: pooled, Logger: logger, Name: name})
	}
	out.engine, err = open(cfg.DatabaseURL, "engine",
		db.PoolSize{MaxConns: int32(cfg.PoolMaxConns), MinConns: int32(cfg.PoolMinConns)}, behindPooler)
	if err != nil {
		return nil, err
	}
	// Kept open: a request would otherwise pay for a connection's setup.
	requestConns := int32(cmp.Or(cfg.PoolRequestConns, defaultRequestConns))
	out.requests, err = open(cfg.DatabaseURL, "requests", db.PoolSize{MaxConns: requestConns, MinConns: requestConns}, behindPooler)
	if err != nil {
		out.Close()
		return nil, err
	}
	if cfg.DirectDatabaseURL != "" {
		out.direct, err = open(cfg.DirectDatabaseURL, "direct", db.PoolSize{MaxConns: directConns}, false)
		if err != nil {
			out.Close()
			return nil, err
		}
	}
	return out, nil
}

// migrate applies the pending migrations through the direct pool, or the
// engine's (with a table lock behind a pooler).
func (d *serveDatabase) migrate(ctx context.Context, logger *slog.Logger) error {
	if d.direct != nil {
		return db.Migrate(ctx, d.direct, logger)
	}
	return db.MigrateWith(ctx, d.engine, db.MigratorOptions{Logger: logger, BehindPooler: d.behindPooler})
}

// Close closes every pool opened.
func (d *serveDatabase) Close() {
	for _, p := range []*pgxpool.Pool{d.direct, d.requests, d.engine} {
		if p != nil {
			p.Close()
		}
	}
}

// nonEmpty is s as a list, or none.
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
