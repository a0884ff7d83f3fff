package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/db"
)

func newMigrateCommand() *cobra.Command {
	var url, direct string
	withMigrator := func(use, short string, run func(cmd *cobra.Command, m *db.Migrator) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: noArgs, RunE: func(cmd *cobra.Command, _ []string) error {
			// Migrations want a session of their own: the direct URL when
			// DATABASE_URL is a transaction pooler.
			target := cmp.Or(direct, url)
			if target == "" {
				return errors.New("no database: set DATABASE_URL or --database-url")
			}
			behindPooler, err := db.DetectTransactionPooler(cmd.Context(), target, nil)
			if err != nil {
				return err
			}
			pool, err := db.OpenPoolWith(cmd.Context(), target, db.PoolOptions{BehindPooler: behindPooler})
			if err != nil {
				return err
			}
			defer pool.Close()
			m, err := db.NewMigratorWith(pool, db.MigratorOptions{BehindPooler: behindPooler})
			if err != nil {
				return err
			}
			defer m.Close()
			return run(cmd, m)
		}}
	}
	cmd := newGroupCommand("migrate", "Apply, roll back or inspect schema migrations (DATABASE_URL)",
		withMigrator("up", "Apply every pending migration", func(cmd *cobra.Command, m *db.Migrator) error {
			res, err := m.Up(cmd.Context())
			for _, r := range res {
				fmt.Printf("applied %d %s (%s)\n", r.Source.Version, r.Source.Path, r.Duration)
			}
			if err == nil && len(res) == 0 {
				fmt.Println("schema is current")
			}
			return err
		}),
		withMigrator("down", "Roll back the latest migration", func(cmd *cobra.Command, m *db.Migrator) error {
			r, err := m.Down(cmd.Context())
			if r != nil {
				fmt.Printf("rolled back %d %s (%s)\n", r.Source.Version, r.Source.Path, r.Duration)
			}
			return err
		}),
		withMigrator("status", "List migrations, applied or pending", func(cmd *cobra.Command, m *db.Migrator) error {
			st, err := m.Status(cmd.Context())
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
		}))
	cmd.PersistentFlags().StringVar(&url, "database-url", envOr("DATABASE_URL", ""), "Postgres URL (DATABASE_URL)")
	cmd.PersistentFlags().StringVar(&direct, "direct-database-url", envOr("AX_DIRECT_DATABASE_URL", ""),
		"Postgres URL of the database itself when DATABASE_URL is a transaction pooler; used instead when set (AX_DIRECT_DATABASE_URL)")
	return cmd
}
