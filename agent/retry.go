package agent

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// backoff is an exponential backoff with jitter: delay n is drawn from
// [d/2, d] with d = Min·2ⁿ capped at Max, so agents that lost the server at
// the same moment do not all come back at the same moment.
type backoff struct {
	Min, Max time.Duration
}

var defaultBackoff = backoff{Min: 200 * time.Millisecond, Max: 30 * time.Second}

func (b backoff) delay(attempt int) time.Duration {
	d := b.Max
	if attempt < 30 && b.Min<<attempt < b.Max {
		d = b.Min << attempt
	}
	return d/2 + rand.N(d/2+1)
}

// errStaleSession marks a call refused because the agent's token was
// refused: the session has been dropped, so trying again registers anew.
var errStaleSession = errors.New("session refused, registering again")

// temporary reports whether a failed call may succeed if tried again: the
// network or the server being away, or a session that is being replaced.
// A refused bootstrap key or a refused request (4xx) will not get better.
func temporary(err error) bool {
	var se *StatusError
	switch {
	case errors.Is(err, errStaleSession):
		return true
	case errors.Is(err, ErrUnauthorized), errors.Is(err, errMalformed), errors.Is(err, errResultsRefused):
		return false
	case errors.As(err, &se):
		return se.Temporary()
	}
	return true // connection refused, reset, timeout of one attempt…
}

// retry runs op until it succeeds, fails for good, or ctx ends; it returns
// op's last error.
func (a *Agent) retry(ctx context.Context, what string, op func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := op(ctx)
		if err == nil || !temporary(err) || ctx.Err() != nil {
			return err
		}
		d := a.backoff.delay(attempt)
		a.log.DebugContext(ctx, "call failed, retrying", "call", what, "error", err, "retry_in", d.String())
		if sleep(ctx, d) != nil {
			return err
		}
	}
}

// call runs op with the current session, registering first when there is
// none, and retries it like retry. A refused token drops the session, so the
// next attempt registers again.
func (a *Agent) call(ctx context.Context, what string, op func(context.Context, Session) error) error {
	return a.retry(ctx, what, func(ctx context.Context) error {
		s, err := a.sessions.current(ctx)
		if err != nil {
			return err
		}
		err = op(ctx, s)
		if errors.Is(err, ErrUnauthorized) {
			a.sessions.drop(s)
			return errors.Join(errStaleSession, err)
		}
		return err
	})
}

// callHeld is call for the goodbyes (release, deregister): it uses the
// session the agent holds and never registers a new agent just to say
// goodbye with it. It does nothing when there is no session.
func (a *Agent) callHeld(ctx context.Context, what string, op func(context.Context, Session) error) error {
	s, ok := a.sessions.held()
	if !ok {
		return nil
	}
	return a.retry(ctx, what, func(ctx context.Context) error { return op(ctx, s) })
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
