package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"
)

func runMigrate(ctx context.Context, args []string) error {
	pool, args, err := openDatabase(ctx, "ax migrate", args)
	if err != nil {
		return err
	}
	var m *db.Migrator
	if pool != nil {
		defer pool.Close()
		if m, err = db.NewMigrator(pool, nil); err != nil {
			return err
		}
		defer m.Close()
	}
	return subcommand(ctx, "migrate", args, map[string]func(context.Context, []string) error{
		"up": func(ctx context.Context, args []string) error {
			if err := parseNoFlags("ax migrate up", args); err != nil {
				return err
			}
			res, err := m.Up(ctx)
			for _, r := range res {
				fmt.Printf("applied %d %s (%s)\n", r.Source.Version, r.Source.Path, r.Duration)
			}
			if err == nil && len(res) == 0 {
				fmt.Println("schema is current")
			}
			return err
		},
		"down": func(ctx context.Context, args []string) error {
			if err := parseNoFlags("ax migrate down", args); err != nil {
				return err
			}
			r, err := m.Down(ctx)
			if r != nil {
				fmt.Printf("rolled back %d %s (%s)\n", r.Source.Version, r.Source.Path, r.Duration)
			}
			return err
		},
		"status": func(ctx context.Context, args []string) error {
			if err := parseNoFlags("ax migrate status", args); err != nil {
				return err
			}
			st, err := m.Status(ctx)
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tSTATE\tAPPLIED AT\tSOURCE")
			for _, s := range st {
				applied := "-"
				if !s.AppliedAt.IsZero() {
					applied = s.AppliedAt.UTC().Format("2006-01-02 15:04:05Z")
				}
				fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", s.Source.Version, s.State, applied, s.Source.Path)
			}
			return w.Flush()
		},
	})
}

// openDatabase parses --database-url (default DATABASE_URL) for the
// commands that work on the database directly and returns the pool and
// the remaining arguments. When those ask for help, it opens nothing and
// returns a nil pool: the subcommand prints its usage without a database.
func openDatabase(ctx context.Context, name string, args []string) (*pgxpool.Pool, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	url := fs.String("database-url", envOr("DATABASE_URL", ""), "Postgres URL (DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if wantsHelp(fs.Args()) {
		return nil, fs.Args(), nil // the subcommand prints its usage; no database needed
	}
	if *url == "" {
		return nil, nil, errors.New("no database: set DATABASE_URL or --database-url")
	}
	pool, err := db.Open(ctx, *url)
	if err != nil {
		return nil, nil, err
	}
	return pool, fs.Args(), nil
}

// parseNoFlags parses the arguments of a subcommand that takes no flags
// and no arguments, so that -h prints its usage (and nothing else is
// accepted).
func parseNoFlags(name string, args []string) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("usage: %s (no arguments)", name)
	}
	return nil
}
