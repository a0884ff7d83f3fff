package db

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Backoff of waitForServer: the first retry soon (a slot freed by a
// replica a deploy just stopped), then no more than one try every few
// seconds per waiting process, so waiting replicas do not take the
// server's few reserved slots' worth of connects.
const (
	firstConnectBackoff = 250 * time.Millisecond
	maxConnectBackoff   = 5 * time.Second
)

// waitForServer runs connect until it succeeds. With a logger, a refusal
// that a later try may not meet (Transient: no free slot, server starting
// or in recovery, network) is logged with its reason and retried with
// backoff until ctx ends; other errors (authentication, a database that
// does not exist, TLS verification) are returned at once, with the real
// cause first (ConnectCause).
func waitForServer(ctx context.Context, logger *slog.Logger, name string, connect func(context.Context) error) error {
	backoff := firstConnectBackoff
	waitingSince := time.Now()
	for attempt := 1; ; attempt++ {
		err := connect(ctx)
		if err == nil {
			if attempt > 1 {
				logger.InfoContext(ctx, "database connection made after waiting", "pool", name, "attempts", attempt,
					"waited", time.Since(waitingSince).Round(time.Millisecond))
			}
			return nil
		}
		err = ConnectCause(err)
		if logger == nil || !Transient(err) || ctx.Err() != nil {
			return err
		}
		// Warn on the first refusal and then every so often, so a long
		// wait (a full server during a deploy) is visible without a line
		// per try.
		if attempt == 1 || attempt%10 == 0 {
			logger.WarnContext(ctx, "database refused a connection; waiting and retrying", "pool", name,
				"reason", err.Error(), "attempt", attempt, "backoff", backoff)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxConnectBackoff)
	}
}

// tlsRefused is how pgconn words a server that does not speak TLS, which
// sslmode=prefer (the default) tries first and then falls back from.
const tlsRefused = "server refused TLS connection"

// ConnectCause returns err, a failed connect, with its real cause first:
// pgconn lists every attempt of a connect, and with sslmode=prefer (the
// default) against a server without TLS the first is always "tls error:
// server refused TLS connection", however the plain attempt that follows
// failed (no such role, no free slot). The attempts that say something
// else come first, each once; the TLS refusal is kept at the end only
// when it is all there is. The error still wraps err.
func ConnectCause(err error) error {
	var connectErr *pgconn.ConnectError
	if !errors.As(err, &connectErr) {
		return err
	}
	joined, ok := connectErr.Unwrap().(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var causes, refusals []string
	seen := map[string]bool{}
	for _, attempt := range joined.Unwrap() {
		msg := attempt.Error()
		if seen[msg] {
			continue
		}
		seen[msg] = true
		if strings.Contains(msg, tlsRefused) {
			refusals = append(refusals, msg)
			continue
		}
		causes = append(causes, msg)
	}
	if len(causes) == 0 {
		causes = refusals
	}
	return &connectCauseError{msg: "failed to connect: " + strings.Join(causes, "; "), err: err}
}

type connectCauseError struct {
	msg string
	err error
}

func (e *connectCauseError) Error() string { return e.msg }
func (e *connectCauseError) Unwrap() error { return e.err }
