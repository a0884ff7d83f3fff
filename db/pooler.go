package db

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
)

// sessionProbeChannel is the channel DetectTransactionPooler listens on.
const sessionProbeChannel = "ax_session_probe"

// SessionProbeTimeout is how long DetectTransactionPooler waits for its
// notification. A direct connection delivers it in under a millisecond
// when idle and tens of milliseconds under heavy write load; behind a
// transaction pooler it never arrives, and a start waits this long once.
const SessionProbeTimeout = 2 * time.Second

// DetectTransactionPooler reports whether url leads to a transaction-mode
// pooler (PgBouncer with pool_mode=transaction, Supabase's and Neon's
// pooled endpoints, RDS Proxy): there a client connection holds a server
// session only for the length of a transaction, so what lives in a
// session (LISTEN, prepared statements, session advisory locks, SET)
// does not survive between transactions.
//
// It tells by what is lost: one connection listens, a second notifies,
// and the first waits. A connection with a session of its own always
// gets the notification; behind a transaction pooler the listener's
// session went back to the pooler's pool when LISTEN ended, and the
// notification goes to whichever client holds that session, or nowhere.
// Both connections send no session settings at start (a stock pooler
// refuses unknown startup parameters) and use the simple protocol. With
// a logger, connecting waits while the server has no free slot (see
// PoolOptions.Logger).
func DetectTransactionPooler(ctx context.Context, url string, logger *slog.Logger) (bool, error) {
	var listener, sender *pgx.Conn
	defer func() {
		if listener != nil {
			// Behind a pooler the LISTEN stays on a server session that
			// others get next; this may reach it (or any other).
			_, _ = listener.Exec(context.WithoutCancel(ctx), "UNLISTEN *")
		}
		for _, c := range []*pgx.Conn{listener, sender} {
			if c != nil {
				c.Close(context.WithoutCancel(ctx))
			}
		}
	}()
	for _, c := range []**pgx.Conn{&listener, &sender} {
		err := waitForServer(ctx, logger, "probe", func(ctx context.Context) (err error) {
			*c, err = connectBare(ctx, url)
			return err
		})
		if err != nil {
			return false, fmt.Errorf("error connecting to database: %w", err)
		}
	}
	if _, err := listener.Exec(ctx, "LISTEN "+sessionProbeChannel); err != nil {
		return false, fmt.Errorf("error listening for the session probe: %w", err)
	}
	payload := randomToken()
	if _, err := sender.Exec(ctx, "SELECT pg_notify($1, $2)", sessionProbeChannel, payload); err != nil {
		return false, fmt.Errorf("error sending the session probe: %w", err)
	}
	waitCtx, cancel := context.WithTimeout(ctx, SessionProbeTimeout)
	defer cancel()
	for {
		note, err := listener.WaitForNotification(waitCtx)
		switch {
		case err == nil && note.Payload == payload:
			return false, nil
		case err == nil:
			continue // another replica's probe
		case ctx.Err() != nil:
			return false, ctx.Err()
		case errors.Is(err, context.DeadlineExceeded) || waitCtx.Err() != nil:
			return true, nil
		default:
			return false, fmt.Errorf("error waiting for the session probe: %w", err)
		}
	}
}

// connectBare opens one connection to url as a pooler accepts it: no
// runtime parameters beyond the url's, and the simple protocol, which
// keeps no prepared statement on the server.
func connectBare(ctx context.Context, url string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("error parsing database url: %w", err)
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	return pgx.ConnectConfig(ctx, cfg)
}

// randomToken is 16 random bytes in hex: probe payloads no other replica
// sends.
func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}
