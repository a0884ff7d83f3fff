package main

import (
	"errors"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/db"
)

func newMigrateCommand() *cobra.Command {
	var url string
	withMigrator := func(use, short string, run func(cmd *cobra.Command, m *db.Migrator) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: noArgs, RunE: func(cmd *cobra.Command, _ []string) error {
			if url == "" {
				return errors.New("no database: set DATABASE_URL or --database-url")
			}
			pool, err := db.Open(cmd.Context(), url)
			if err != nil {
				return err
			}
			defer pool.Close()
			m, err := db.NewMigrator(pool, nil)
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
	return cmd
}
