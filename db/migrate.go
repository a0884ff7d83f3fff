package db

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/ax-scheduler/ax/migrations"
)

// Schema is the Postgres schema that holds ax's tables and River's, for
// the layers above db that name it (River's client and its channels).
const Schema = migrations.Schema

// Migrator applies ax's migrations. Every change runs under a lock, so
// replicas that start together migrate once: one applies, the others wait
// and then find nothing to do. On a connection of its own the lock is
// goose's Postgres session lock (an advisory lock); behind a transaction
// pooler, where a session lock taken in one transaction may be held by a
// server session another client gets next, it is goose's lock table
// (ax.migration_lock, a row with a lease).
type Migrator struct {
	provider *goose.Provider
	sqlDB    *sql.DB
	pool     *pgxpool.Pool
	logger   *slog.Logger
}

// MigratorOptions say how a Migrator works.
type MigratorOptions struct {
	// Logger, when set, gets one line per migration applied (not goose's
	// verbose mode: it logs every statement, hundreds on a first start).
	Logger *slog.Logger
	// BehindPooler says the pool goes through a transaction-mode pooler
	// (DetectTransactionPooler): the lock is then a table's row, not a
	// session's advisory lock.
	BehindPooler bool
}

// MigrationLockTable is the lock table of migrations run behind a
// transaction pooler.
const MigrationLockTable = migrations.Schema + ".migration_lock"

// NewMigrator returns a Migrator working through pool, logging to logger
// (nil: not). Close it after use.
func NewMigrator(pool *pgxpool.Pool, logger *slog.Logger) (*Migrator, error) {
	return NewMigratorWith(pool, MigratorOptions{Logger: logger})
}

// NewMigratorWith returns a Migrator working through pool as opts say.
func NewMigratorWith(pool *pgxpool.Pool, opts MigratorOptions) (*Migrator, error) {
	lockOpt, err := migrationLock(opts.BehindPooler)
	if err != nil {
		return nil, fmt.Errorf("error creating migration lock: %w", err)
	}
	sqlDB := stdlib.OpenDBFromPool(pool)
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS(),
		lockOpt,
		goose.WithTableName(migrations.VersionTable),
		goose.WithGoMigrations(migrations.GoMigrations()...),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		sqlDB.Close()
		return nil, fmt.Errorf("error creating migration provider: %w", err)
	}
	return &Migrator{provider: provider, sqlDB: sqlDB, pool: pool, logger: opts.Logger}, nil
}

// migrationLock is goose's session lock, or its lock table behind a
// transaction pooler. Waiting replicas retry every second for up to 5
// minutes (goose's default polls every 5 s, which slows every cold start).
func migrationLock(behindPooler bool) (goose.ProviderOption, error) {
	if behindPooler {
		locker, err := lock.NewPostgresTableLocker(lock.WithTableName(MigrationLockTable),
			lock.WithTableLockTimeout(time.Second, 300))
		return goose.WithLocker(locker), err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 300))
	return goose.WithSessionLocker(locker), err
}

// versionTableLockID serializes moving goose's version table into schema
// ax between replicas that start together (a transaction's advisory
// lock: it holds behind a pooler too).
const versionTableLockID = 0x61785f76657273 // "ax_vers"

// prepareSchema makes what goose needs before it reads its version table:
// schema ax, where the table lives, and, for a database that ax migrated
// before the table moved there, the move of public.ax_schema_version
// (with its rows) into it. It changes nothing when both are done, so a
// role without the right to create (the runtime role) passes through.
func (m *Migrator) prepareSchema(ctx context.Context) error {
	var schemaExists, legacyExists bool
	err := m.pool.QueryRow(ctx, "SELECT to_regnamespace($1) IS NOT NULL, to_regclass($2) IS NOT NULL AND to_regclass($3) IS NULL",
		migrations.Schema, migrations.LegacyVersionTable, migrations.VersionTable).Scan(&schemaExists, &legacyExists)
	if err != nil {
		return fmt.Errorf("error reading the schema version's place: %w", mapErr(err))
	}
	if schemaExists && !legacyExists {
		return nil
	}
	err = WithTx(ctx, m.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(versionTableLockID)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, moveVersionTable)
		return err
	})
	if err != nil {
		return fmt.Errorf("error moving the schema version into schema %s: %w", migrations.Schema, mapErr(err))
	}
	return nil
}

// moveVersionTable makes schema ax and moves goose's version table from
// public into it, unless another replica just did.
const moveVersionTable = `DO $$
BEGIN
  IF to_regnamespace('` + migrations.Schema + `') IS NULL THEN
    CREATE SCHEMA ` + migrations.Schema + `;
  END IF;
  IF to_regclass('` + migrations.LegacyVersionTable + `') IS NOT NULL
     AND to_regclass('` + migrations.VersionTable + `') IS NULL THEN
    ALTER TABLE ` + migrations.LegacyVersionTable + ` SET SCHEMA ` + migrations.Schema + `;
    ALTER TABLE ` + migrations.Schema + `.` + legacyVersionTableName + ` RENAME TO ` + versionTableName + `;
  END IF;
END $$`

const (
	legacyVersionTableName = "ax_schema_version"
	versionTableName       = "schema_version"
)

// Close releases the migrator's connection handle (not the pool).
func (m *Migrator) Close() error { return m.sqlDB.Close() }

// Up applies every pending migration.
func (m *Migrator) Up(ctx context.Context) ([]*goose.MigrationResult, error) {
	if err := m.prepareSchema(ctx); err != nil {
		return nil, err
	}
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
	if err := m.prepareSchema(ctx); err != nil {
		return nil, err
	}
	res, err := m.provider.Down(ctx)
	if err != nil {
		return res, fmt.Errorf("error migrating down: %w", err)
	}
	return res, nil
}

// Status lists every known migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) ([]*goose.MigrationStatus, error) {
	if err := m.prepareSchema(ctx); err != nil {
		return nil, err
	}
	st, err := m.provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("error reading migration status: %w", err)
	}
	return st, nil
}

// HasPending reports whether the database lacks migrations this binary has.
func (m *Migrator) HasPending(ctx context.Context) (bool, error) {
	if err := m.prepareSchema(ctx); err != nil {
		return false, err
	}
	pending, err := m.provider.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("error checking pending migrations: %w", err)
	}
	return pending, nil
}

// Migrate applies all pending migrations through pool: the one call
// `ax serve` and the test harness need.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	return MigrateWith(ctx, pool, MigratorOptions{Logger: logger})
}

// MigrateWith is Migrate with options.
func MigrateWith(ctx context.Context, pool *pgxpool.Pool, opts MigratorOptions) error {
	m, err := NewMigratorWith(pool, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	_, err = m.Up(ctx)
	return err
}
