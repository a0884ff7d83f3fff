package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBackoffGrowsWithJitterAndCap(t *testing.T) {
	t.Parallel()
	b := backoff{Min: 100 * time.Millisecond, Max: time.Second}
	for attempt, ceiling := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceiling *= time.Millisecond
		for range 50 {
			d := b.delay(attempt)
			require.True(t, d >= ceiling/2 && d <= ceiling, "attempt %d: %s outside [%s, %s]", attempt, d, ceiling/2, ceiling)
		}
	}
	require.LessOrEqual(t, b.delay(1000), time.Second, "no overflow on long outages")
}

func TestTemporary(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{errors.New("dial tcp 127.0.0.1:8080: connect: connection refused"), true},
		{&StatusError{Code: http.StatusBadGateway}, true},
		{&StatusError{Code: http.StatusTooManyRequests}, true},
		{&StatusError{Code: http.StatusUnprocessableEntity}, false},
		{&StatusError{Code: http.StatusForbidden}, false},
		{fmt.Errorf("register: %w", ErrUnauthorized), false},
		{errors.Join(errStaleSession, ErrUnauthorized), true},
	} {
		require.Equal(t, tc.want, temporary(tc.err), tc.err.Error())
	}
}

func TestSessionsRegisterOnceForConcurrentCallers(t *testing.T) {
	t.Parallel()
	var registrations atomic.Int32
	s := newSessions(func(context.Context) (Credentials, error) {
		n := registrations.Add(1)
		time.Sleep(20 * time.Millisecond)
		return Credentials{AgentID: fmt.Sprint("agent-", n), Token: fmt.Sprint("token-", n)}, nil
	})
	first := callersAgree(t, s)
	require.EqualValues(t, 1, registrations.Load())

	s.drop(first)
	s.drop(first) // a second loop noticing the same refusal
	second := callersAgree(t, s)
	require.EqualValues(t, 2, registrations.Load())
	require.NotEqual(t, first, second)

	s.drop(first) // a stale refusal must not drop the new session
	held, ok := s.held()
	require.True(t, ok)
	require.Equal(t, second, held)
}

// callersAgree asks for the session from many goroutines at once and
// checks they all get the same one.
func callersAgree(t *testing.T, s *sessions) Session {
	t.Helper()
	var wg sync.WaitGroup
	got := make([]Session, 10)
	for i := range got {
		wg.Go(func() {
			var err error
			got[i], err = s.current(context.Background())
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	for _, g := range got {
		require.Equal(t, got[0], g)
	}
	return got[0]
}

func TestSessionsWaitingCallerCanGiveUp(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	registering := make(chan struct{}, 1)
	s := newSessions(func(ctx context.Context) (Credentials, error) {
		select {
		case registering <- struct{}{}:
		default:
		}
		select {
		case <-release:
			return Credentials{AgentID: "a", Token: "t"}, nil
		case <-ctx.Done():
			return Credentials{}, ctx.Err()
		}
	})
	go func() { _, _ = s.current(context.Background()) }()
	<-registering // the first caller is registering
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := s.current(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	close(release)
}
