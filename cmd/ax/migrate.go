package main

import (
	"cmp"
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
		if m, err = db.NewMigratorWith(pool.Pool, db.MigratorOptions{BehindPooler: pool.behindPooler}); err != nil {
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

// cliPool is the pool of a command that works on the database directly.
type cliPool struct {
	*pgxpool.Pool
	behindPooler bool // it goes through a transaction pooler
}

// openDatabase parses --database-url (default DATABASE_URL) and
// --direct-database-url (default AX_DIRECT_DATABASE_URL) for the commands
// that work on the database directly and returns a pool, to the direct
// URL when there is one, and the remaining arguments. When those ask for
// help, it opens nothing and returns a nil pool: the subcommand prints
// its usage without a database.
func openDatabase(ctx context.Context, name string, args []string) (*cliPool, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	url := fs.String("database-url", envOr("DATABASE_URL", ""), "Postgres URL (DATABASE_URL)")
	direct := fs.String("direct-database-url", envOr("AX_DIRECT_DATABASE_URL", ""),
		"Postgres URL of the database itself when DATABASE_URL is a transaction pooler; used instead when set (AX_DIRECT_DATABASE_URL)")
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	if wantsHelp(fs.Args()) {
		return nil, fs.Args(), nil // the subcommand prints its usage; no database needed
	}
	target := cmp.Or(*direct, *url)
	if target == "" {
		return nil, nil, errors.New("no database: set DATABASE_URL or --database-url")
	}
	behindPooler, err := db.DetectTransactionPooler(ctx, target, nil)
	if err != nil {
		return nil, nil, err
	}
	pool, err := db.OpenPoolWith(ctx, target, db.PoolOptions{BehindPooler: behindPooler})
	if err != nil {
		return nil, nil, err
	}
	return &cliPool{Pool: pool, behindPooler: behindPooler}, fs.Args(), nil
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
