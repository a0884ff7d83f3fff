package db

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// CreateDatabaseIfMissing creates database name (from template, when not
// empty) unless it exists. Names are quoted, so any name is safe. Two
// callers at once may both find it missing: the one whose CREATE loses
// (a unique violation on pg_database) finds it there and is done, as
// `make test` runs two `ax dev` fuzz targets together.
func CreateDatabaseIfMissing(ctx context.Context, conn *pgx.Conn, name, template string) error {
	exists := func() (bool, error) {
		var found bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&found); err != nil {
			return false, fmt.Errorf("error looking up database %s: %w", name, err)
		}
		return found, nil
	}
	if found, err := exists(); err != nil || found {
		return err
	}
	sql := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		sql += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if _, err := conn.Exec(ctx, sql); err != nil {
		if found, lookErr := exists(); lookErr == nil && found {
			return nil // made by another caller meanwhile
		}
		return fmt.Errorf("error creating database %s: %w", name, mapErr(err))
	}
	return nil
}

// WithDatabase returns the connection URL rawURL pointed at database name.
func WithDatabase(rawURL, name string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("database url must be a postgres:// URL to switch databases")
	}
	u.Path = "/" + name
	return u.String(), nil
}
