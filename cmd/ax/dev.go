package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/ax-scheduler/ax/db"
	"github.com/ax-scheduler/ax/db/pglocal"
	"github.com/ax-scheduler/ax/queue"
)

// devDatabase is the database `ax dev` uses on a local or started server.
const devDatabase = "ax_dev"

func runDev(ctx context.Context, args []string) error {
	if len(args) > 0 && args[0] == "exec" {
		return runDevExec(ctx, args[1:])
	}
	fs := flag.NewFlagSet("ax dev", flag.ContinueOnError)
	addr := fs.String("addr", envOr("AX_ADDR", "127.0.0.1:8080"), "listen address")
	dir := fs.String("dir", ".ax", "folder for the dev key and, when ax starts its own Postgres, its data")
	own := fs.Bool("own-postgres", false, "start a Postgres cluster even if DATABASE_URL or 127.0.0.1:5432 is there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	logger := newLogger(true)
	srv, err := pglocal.Find(ctx, pglocal.Options{
		Dir: filepath.Join(*dir, "postgres"), Keep: true, SkipEnv: *own, SkipLocal: *own, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer srv.Stop()
	url := srv.URL
	if srv.Source != pglocal.SourceEnv {
		if url, err = ensureDatabase(ctx, srv.URL, devDatabase); err != nil {
			return err
		}
	}
	key, err := devKey(*dir)
	if err != nil {
		return err
	}
	return serve(ctx, logger, serveConfig{Addr: *addr, DatabaseURL: url, AdminKey: key,
		// A developer's receivers and HTTP targets run on their machine.
		Outbound: outboundConfig{AllowLoopback: true, AllowPrivate: true},
		Ready:    func(bound string) { printDevBanner(bound, key, srv, url) }})
}

// runDevExec runs a command with DATABASE_URL pointing at a Postgres server
// (found or started), then stops what it started: `make test` runs the
// suite this way so it works on any machine with Postgres binaries.
func runDevExec(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("ax dev exec", flag.ContinueOnError)
	own := fs.Bool("own-postgres", false, "start a Postgres cluster even if one is there")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("usage: ax dev exec [--own-postgres] -- COMMAND [ARGS]")
	}
	srv, err := pglocal.Find(ctx, pglocal.Options{SkipEnv: *own, SkipLocal: *own, Logger: newLogger(true)})
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(os.Stderr, "ax dev exec: PostgreSQL from %s\n", srv.Source)
	cmd := exec.CommandContext(ctx, fs.Arg(0), fs.Args()[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), srv.Env()...)
	return cmd.Run()
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
