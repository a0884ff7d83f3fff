// Package migrations holds ax's schema as goose migrations: SQL files
// embedded in the binary, plus Go migrations where another library owns the
// SQL (River).
package migrations

import (
	"embed"
	"io/fs"

	"github.com/pressly/goose/v3"
)

// Schema is the Postgres schema that holds all of ax's tables, River's
// included.
const Schema = "ax"

// VersionTable is goose's bookkeeping table. It lives in schema ax, so
// that a runtime role granted schema ax reads it (readiness checks the
// schema is current) and ax keeps nothing in public. The migrator makes
// the schema before goose reads the table, and migrating all the way
// down leaves the two.
const VersionTable = Schema + ".schema_version"

// LegacyVersionTable is where VersionTable lived before; the migrator
// moves it, rows and all, into schema ax.
const LegacyVersionTable = "public.ax_schema_version"

//go:embed *.sql
var sqlFiles embed.FS

// FS returns the embedded SQL migrations.
func FS() fs.FS { return sqlFiles }

// GoMigrations returns the migrations written in Go.
func GoMigrations() []*goose.Migration {
	return []*goose.Migration{riverMigration()}
}
