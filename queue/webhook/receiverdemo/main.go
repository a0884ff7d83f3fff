// Command receiverdemo is a reference receiver of ax's callbacks: a small,
// complete program to read, run and copy. It shows the two things every
// receiver must do:
//
//  1. Verify the request before anything else (webhook.Verifier: the
//     signature under one of its secrets, the timestamp within 5 minutes).
//  2. Process each message once. ax retries until it gets a 2xx, and
//     gateways and the receiver's own retries deliver duplicates, all with
//     the same webhook-id. The receiver inserts that id into its own table
//     under a unique index, in the same transaction as its business write:
//     a duplicate finds the id taken, writes nothing and is answered 200 so
//     that the sender stops; a failed write rolls the id back with it, so
//     the next delivery is processed.
//
// Run it against any Postgres database (it creates its two tables there):
//
//	export RECEIVER_DATABASE_URL=postgres://localhost:5432/receiver
//	export WEBHOOK_SECRETS='whsec_…'   # two, space-separated, during a rotation
//	go run ./queue/webhook/receiverdemo -addr 127.0.0.1:8080
//
// and give ax http://127.0.0.1:8080/callbacks/ax as the job's callback URL
// (the doc of package webhook shows a curl request to try it by hand).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/queue/webhook"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *addr, os.Getenv("RECEIVER_DATABASE_URL"), os.Getenv("WEBHOOK_SECRETS"), logger); err != nil {
		logger.Error("receiverdemo stopped", "error", err)
		os.Exit(1)
	}
}

// run serves callbacks on addr until ctx ends.
func run(ctx context.Context, addr, databaseURL, secrets string, logger *slog.Logger) error {
	verifier, err := newVerifier(secrets, logger)
	if err != nil {
		return err
	}
	if databaseURL == "" {
		return errors.New("RECEIVER_DATABASE_URL is not set")
	}
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("error opening database: %w", err)
	}
	defer pool.Close()
	receiver := NewReceiver(pool, logger)
	if err := receiver.Migrate(ctx); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("POST /callbacks/ax", receiver.Handler(verifier))
	return serve(ctx, &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}, logger)
}

// newVerifier reads the space-separated secrets of WEBHOOK_SECRETS.
func newVerifier(secrets string, logger *slog.Logger) (*webhook.Verifier, error) {
	parsed, err := webhook.ParseSecrets(strings.Fields(secrets)...)
	if err != nil {
		return nil, fmt.Errorf("WEBHOOK_SECRETS: %w", err)
	}
	if len(parsed) == 0 {
		return nil, errors.New("WEBHOOK_SECRETS is not set")
	}
	return &webhook.Verifier{Secrets: parsed, Logger: logger}, nil
}

// serve runs srv until ctx ends, then lets requests in flight finish.
func serve(ctx context.Context, srv *http.Server, logger *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.ListenAndServe() }()
	logger.InfoContext(ctx, "receiverdemo listening", "addr", srv.Addr)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
