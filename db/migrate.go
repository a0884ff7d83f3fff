package db

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ax-scheduler/ax/migrations"
)

// Schema is the Postgres schema that holds ax's tables and River's, for
// the layers above db that name it (River's client and its channels).
const Schema = migrations.Schema

// Migrator applies ax's migrations. Every change runs under goose's
// Postgres session lock (an advisory lock), so replicas that start together
// migrate once: one applies, the others wait and then find nothing to do.
type Migrator struct {
	provider *goose.Provider
	sqlDB    *sql.DB
	logger   *slog.Logger
}

// NewMigrator returns a Migrator working through pool. Close it after use.
// With a logger, Up logs one line per migration applied (not goose's
// verbose mode: it logs every statement, hundreds on a first start).
func NewMigrator(pool *pgxpool.Pool, logger *slog.Logger) (*Migrator, error) {
	// Waiting replicas retry the lock every second for up to 5 minutes
	// (goose's default polls every 5 s, which slows every cold start).
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, fmt.Errorf("error creating migration lock: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	opts := []goose.ProviderOption{
		goose.WithSessionLocker(locker),
		goose.WithTableName(migrations.VersionTable),
		goose.WithGoMigrations(migrations.GoMigrations()...),
		goose.WithDisableGlobalRegistry(true),
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS(), opts...)
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("error creating migration provider: %w", err)
	}
	return &Migrator{provider: provider, sqlDB: sqlDB, logger: logger}, nil
}

// Close releases the migrator's connection handle (not the pool).
func (m *Migrator) Close() error { return m.sqlDB.Close() }

// Up applies every pending migration.
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	res, err := m.provider.Up(ctx)
	if m.logger != nil {
		m.logApplied(ctx, res)
	}
	if err != nil {
		return res, fmt.Errorf("error migrating up: %w", err)
	}
	return res, nil
}

// summarizeOver: more migrations than this in one Up (a new database)
// are logged as one line at info, each at debug, so a first start shows
// its banner rather than a screen of migrations; an upgrade's few are
// logged one line each.
const summarizeOver = 5

func (m *Migrator) logApplied(ctx context.Context, res []*goose.MigrationResult) {
	level := slog.LevelInfo
	if len(res) > summarizeOver {
		level = slog.LevelDebug
	}
	var total time.Duration
	for _, r := range res {
		total += r.Duration
		m.logger.Log(ctx, level, "migration applied", "version", r.Source.Version,
			"source", migrationSource(r), "duration_ms", r.Duration.Milliseconds())
	}
	if level == slog.LevelDebug {
		m.logger.InfoContext(ctx, "schema migrated", "applied", len(res), "from", migrationSource(res[0]),
			"to", migrationSource(res[len(res)-1]), "duration_ms", total.Milliseconds())
	}
}

func migrationSource(r *goose.MigrationResult) string {
	if r.Source.Path == "" {
		return "(in Go)" // River's tables
	}
	return filepath.Base(r.Source.Path)
}

// Down rolls back the newest applied migration.
func (m *Migrator) Down(ctx context.Context) (*goose.MigrationResult, error) {
	res, err := m.provider.Down(ctx)
	if err != nil {
		return res, fmt.Errorf("error migrating down: %w", err)
	}
	return res, nil
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("error reading migration status: %w", err)
	}
	return st, nil
}

// HasPending reports whether the database lacks migrations this binary has.
func (m *Migrator) HasPending(ctx context.Context) (bool, error) {
	pending, err := m.provider.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("error checking pending migrations: %w", err)
	}
	return pending, nil
}

// Migrate applies all pending migrations through pool: the one call
// `ax serve` and the test harness need.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	m, err := NewMigrator(pool, logger)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}
