package pglocal

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
)

// localURL is where a developer's own server usually listens, reached over
// TCP so the check does not depend on the distribution's socket folder.
const localURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// localTimeout bounds the check of localURL, so a firewall that drops packets
// does not stall Find.
const localTimeout = 2 * time.Second

// Options configures Find.
type Options struct {
	// Dir is where a started cluster lives. It holds data/ (the cluster),
	// run/ (its unix socket) and postgres.log. A cluster left in Dir by an
	// earlier run, crashed or kept, is stopped if still running and reused;
	// a half-made one is deleted and made again. Only one Server may use a
	// Dir at a time. When run as root, Dir is handed to the postgres OS user,
	// which must be able to reach it.
	//
	// Empty: a new folder in the temp folder, removed on Stop. Temp folders
	// whose process died without Stop are stopped and removed by later calls
	// of Find.
	Dir string

	// Keep keeps the folder and its data on Stop, so that the next Find with
	// the same Dir starts from it.
	Keep bool

	// SkipEnv ignores DATABASE_URL and SkipLocal ignores a server on
	// 127.0.0.1:5432, forcing the fallback (used by tests of this package and
	// by `ax dev --own-postgres`).
	SkipEnv, SkipLocal bool

	// Logger receives what Find and Stop do. Nil: discard.
	Logger *slog.Logger

	// search replaces defaultSearch in tests.
	search *binSearch
}

// Find returns a server, trying in this order: DATABASE_URL if set; a server
// answering on 127.0.0.1:5432 as user postgres without a password; otherwise
// a throwaway cluster started with the local PostgreSQL binaries. Call Stop
// when done.
func Find(ctx context.Context, opts Options) (*Server, error) {
	logger := opts.logger()
	if url := os.Getenv("DATABASE_URL"); url != "" && !opts.SkipEnv {
		logger.InfoContext(ctx, "using PostgreSQL from DATABASE_URL")
		return &Server{URL: url, Source: SourceEnv}, nil
	}
	if !opts.SkipLocal {
		err := ping(ctx, localURL, localTimeout)
		if err == nil {
			logger.InfoContext(ctx, "using local PostgreSQL", "url", localURL)
			return &Server{URL: localURL, Source: SourceLocal}, nil
		}
		logger.InfoContext(ctx, "no usable local PostgreSQL", "url", localURL, "error", err)
	}
	srv, err := start(ctx, opts, logger)
	if err != nil {
		return nil, fmt.Errorf("error starting PostgreSQL: %w", err)
	}
	return srv, nil
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// ping connects to url once and checks the connection works.
func ping(ctx context.Context, url string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return conn.Ping(ctx)
}
