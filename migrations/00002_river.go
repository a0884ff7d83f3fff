package migrations

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/pressly/goose/v3"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/rivermigrate"
)

// RiverSchemaVersion pins River's schema to the version this build of ax was
// written against. Upgrading River adds a new goose migration that raises
// it, so `ax migrate status` shows River's changes like any other.
const RiverSchemaVersion = 8

// riverMigration creates River's tables (used for callbacks, the HTTP
// executor and maintenance) in schema ax with River's own migrator rather
// than a copy of its SQL. It runs under goose's lock but outside goose's
// transaction: River's versions must commit one by one (version 4 adds an
// enum value that version 6 uses, which Postgres refuses in one
// transaction). River records its own progress in ax.river_migration, so an
// interrupted run resumes where it stopped.
func riverMigration() *goose.Migration {
	return goose.NewGoMigration(2,
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			return migrateRiver(ctx, db, rivermigrate.DirectionUp, RiverSchemaVersion)
		}},
		&goose.GoFunc{RunDB: func(ctx context.Context, db *sql.DB) error {
			return migrateRiver(ctx, db, rivermigrate.DirectionDown, -1)
		}},
	)
}

func migrateRiver(ctx context.Context, db *sql.DB, dir rivermigrate.Direction, target int) error {
	migrator, err := rivermigrate.New(riverdatabasesql.New(db), &rivermigrate.Config{Schema: Schema})
	if err != nil {
		return fmt.Errorf("error creating river migrator: %w", err)
	}
	if _, err := migrator.Migrate(ctx, dir, &rivermigrate.MigrateOpts{TargetVersion: target}); err != nil {
		return fmt.Errorf("error migrating river %s: %w", dir, err)
	}
	return nil
}
