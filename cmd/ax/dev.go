package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/db/pglocal"
	"github.com/ax-scheduler/ax/queue"
)

// devDatabase is the database `ax dev` uses on a local or started server.
const devDatabase = "ax_dev"

func newDevCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "dev", Short: "Run ax with a local Postgres and a dev admin key (what `make run` starts)", Args: noArgs,
		Long: "Run ax for development: it uses DATABASE_URL when set (creating that database when it is missing\n" +
			"and the role may), else a Postgres on 127.0.0.1:5432 (database " + devDatabase + "), else one it starts\n" +
			"in --dir. An admin key is kept in --dir/dev-key.",
	}
	addr := cmd.Flags().String("addr", envOr("AX_ADDR", "127.0.0.1:8080"), "listen address (AX_ADDR)")
	dir := cmd.Flags().String("dir", ".ax", "folder for the dev key and, when ax starts its own Postgres, its data")
	own := cmd.Flags().Bool("own-postgres", false, "start a Postgres cluster even if DATABASE_URL or 127.0.0.1:5432 is there")
	_ = cmd.MarkFlagDirname("dir")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		logger := newLogger(true)
		srv, url, err := devPostgres(ctx, *dir, *own, logger)
		if err != nil {
			return err
		}
		defer srv.Stop()
		key, err := devKey(*dir)
		if err != nil {
			return err
		}
		return serve(ctx, logger, serveConfig{Addr: *addr, DatabaseURL: url, AdminKey: key,
			// A developer's receivers and HTTP targets run on their machine.
			Outbound: outboundConfig{AllowLoopback: true, AllowPrivate: true},
			Ready:    func(bound string) { printDevBanner(bound, key, srv, url) }})
	}
	cmd.AddCommand(newDevExecCommand())
	return cmd
}

// devPostgres finds (or starts) the Postgres of `ax dev` and returns the
// URL of its database: DATABASE_URL's, created when missing, or
// devDatabase on a found or started server.
func devPostgres(ctx context.Context, dir string, own bool, logger *slog.Logger) (*pglocal.Server, string, error) {
	opts := pglocal.Options{SkipEnv: own, SkipLocal: own, Logger: logger}
	if dir != "" {
		opts.Dir, opts.Keep = filepath.Join(dir, "postgres"), true
	}
	srv, err := pglocal.Find(ctx, opts)
	if err != nil {
		return nil, "", err
	}
	url := srv.URL
	if srv.Source == pglocal.SourceEnv {
		err = ensureURLDatabase(ctx, url)
	} else {
		url, err = ensureDatabase(ctx, srv.URL, devDatabase)
	}
	if err != nil {
		srv.Stop()
		return nil, "", err
	}
	return srv, url, nil
}

// newDevExecCommand runs a command with DATABASE_URL pointing at the
// database `ax dev` (make run) uses, on a Postgres server found or
// started, then stops what it started: `make test` runs the suite this
// way so it works on any machine with Postgres binaries.
func newDevExecCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use: "exec [--own-postgres] [--] COMMAND [ARGS...]", Short: "Run a command with DATABASE_URL set to the database `ax dev` uses",
		Args: minArgs(1),
	}
	own := cmd.Flags().Bool("own-postgres", false, "start a Postgres cluster even if one is there")
	// Flags after COMMAND are its own: `ax dev exec psql -c 'select 1'`.
	cmd.Flags().SetInterspersed(false)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		srv, url, err := devPostgres(ctx, "", *own, newLogger(true))
		if err != nil {
			return err
		}
		defer srv.Stop()
		fmt.Fprintf(os.Stderr, "ax dev exec: PostgreSQL from %s, database %s\n", srv.Source, databaseName(url))
		c := exec.CommandContext(ctx, args[0], args[1:]...)
		c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
		c.Env = append(os.Environ(), srv.Env()...)
		c.Env = append(c.Env, "DATABASE_URL="+url)
		err = c.Run()
		if exit, ok := errorsAs[*exec.ExitError](err); ok {
			// The command's own exit code, without a second message.
			return &codedError{code: exit.ExitCode(), err: fmt.Errorf("%s exited with %d", args[0], exit.ExitCode())}
		}
		return err
	}
	return cmd
}

// ensureURLDatabase creates the database DATABASE_URL names when it is
// missing and the role may create databases; else it says how to.
func ensureURLDatabase(ctx context.Context, url string) error {
	conn, err := pgx.Connect(ctx, url)
	if err == nil {
		return conn.Close(ctx)
	}
	if pgErr, ok := errorsAs[*pgconn.PgError](err); !ok || pgErr.Code != "3D000" { // invalid_catalog_name: no such database
		return fmt.Errorf("error connecting to DATABASE_URL: %w", err)
	}
	name := databaseName(url)
	maintenance, err := db.WithDatabase(url, "postgres")
	if err != nil {
		return err
	}
	if _, err := ensureDatabase(ctx, maintenance, name); err != nil {
		return fmt.Errorf("database %q does not exist and could not be created (%w): create it as a role that may "+
			"(`createdb %s`, or `psql -c 'CREATE DATABASE %s'`), or point DATABASE_URL at an existing database", name, err, name, name)
	}
	return nil
}

// databaseName is the database a postgres:// URL names.
func databaseName(url string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return "?"
	}
	return cfg.Database
}

// ensureDatabase creates database name on the server at adminURL unless it
// exists and returns its URL.
func ensureDatabase(ctx context.Context, adminURL, name string) (string, error) {
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return "", fmt.Errorf("error parsing database url: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("error connecting to %s: %w", cfg.Host, err)
	}
	defer conn.Close(ctx)
	if err := db.CreateDatabaseIfMissing(ctx, conn, name, ""); err != nil {
		return "", err
	}
	return db.WithDatabase(adminURL, name)
}

// devKey returns the admin key kept in dir/dev-key, making it on first use.
func devKey(dir string) (string, error) {
	path := filepath.Join(dir, "dev-key")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("error creating %s: %w", dir, err)
	}
	key := queue.NewAPIKeySecret()
	if err := os.WriteFile(path, []byte(key+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("error writing %s: %w", path, err)
	}
	return key, nil
}

func printDevBanner(addr, key string, srv *pglocal.Server, dbURL string) {
	base := "http://" + addr
	fmt.Printf(`
ax is running (PostgreSQL: %s, %s)

  API      %s/v1
  Console  %s/ui      (log in with the dev key)
  Docs     %s/docs
  Metrics  %s/metrics
  Dev key  %s   (admin scope; kept in .ax/dev-key)

Try:
  export AX_API_KEY=%s AX_SERVER=%s
  curl -s -H "Authorization: Bearer $AX_API_KEY" $AX_SERVER/v1/jobs
  bin/ax job list   # make run built bin/ax and bin/ax-agent

Run tasks on this machine (shell only when listed in AX_EXECUTORS):
  AX_SERVER=%s AX_AGENT_KEY=%s AX_EXECUTORS=shell,http,handler bin/ax-agent

Stop with Ctrl-C.
`, srv.Source, redactURL(dbURL), base, base, base, base, key, key, base, base, key)
}

func redactURL(u string) string {
	if at := strings.LastIndex(u, "@"); at >= 0 {
		if scheme := strings.Index(u, "://"); scheme >= 0 && scheme < at {
			return u[:scheme+3] + "…@" + u[at+1:]
		}
	}
	return u
}
