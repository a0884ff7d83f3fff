package openapi

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestFairTurnsGiveBackWhatAnEndedCallHeld: a call whose context ends
// while it waits leaves the queue, so no turn is lost, and the calls
// after it still go key by key in turn.
func TestFairTurnsGiveBackWhatAnEndedCallHeld(t *testing.T) {
	var order []uuid16
	f := newFairTurns(1, func(k uuid16) { order = append(order, k) }, nil)
	a, b := uuid16{1}, uuid16{2}
	require.NoError(t, f.acquire(context.Background(), a, true))

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error)
	go func() { gone <- f.acquire(ctx, a, true) }()
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.waiting[a]) == 1 }, time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)
	f.mu.Lock()
	require.Empty(t, f.waiting)
	require.Empty(t, f.ring)
	f.mu.Unlock()

	got := make(chan uuid16, 3)
	wait := func(k uuid16) {
		require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return len(f.waiting[k]) > 0 }, time.Second, time.Millisecond)
	}
	go func() { require.NoError(t, f.acquire(context.Background(), a, true)); got <- a }()
	wait(a)
	go func() { require.NoError(t, f.acquire(context.Background(), a, true)); got <- a }()
	go func() { require.NoError(t, f.acquire(context.Background(), b, true)); got <- b }()
	wait(b)
	f.release()
	require.Equal(t, a, <-got)
	f.release()
	require.Equal(t, b, <-got, "b's turn before a's second call")
	f.release()
	require.Equal(t, a, <-got)
	f.release()
	f.mu.Lock()
	require.Equal(t, 1, f.free, "every turn back")
	f.mu.Unlock()
	require.Equal(t, []uuid16{a, a, b, a}, order)
}

// TestALongPollComesBackForItsTurn: a long poll gives its turn back
// while it waits; coming back, it waits for a turn like any call, but is
// not refused when its key has maxWaitingPerKey calls waiting (its run
// has ended and its client still waits for the answer).
func TestALongPollComesBackForItsTurn(t *testing.T) {
	f := newFairTurns(1, nil, nil)
	key := uuid16{7}
	require.NoError(t, f.acquire(context.Background(), key, true))
	ctx := context.WithValue(context.Background(), heldTurnKey{}, &heldTurn{turns: f, key: key, held: true})
	back := awayFromTurn(ctx)
	require.NoError(t, f.acquire(context.Background(), key, true), "the turn it gave back")
	for range maxWaitingPerKey {
		go func() {
			if err := f.acquire(context.Background(), key, true); err == nil {
				f.release()
			}
		}()
	}
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.waiting[key]) == maxWaitingPerKey
	}, time.Second, time.Millisecond)
	require.ErrorIs(t, f.acquire(context.Background(), key, true), errTooManyWaiting, "a new call is refused")
	came := make(chan error)
	go func() { came <- back() }()
	f.release()
	require.NoError(t, <-came, "the poll has its turn again")
	f.release()
	require.Eventually(t, func() bool { f.mu.Lock(); defer f.mu.Unlock(); return f.free == 1 }, time.Second, time.Millisecond)
}
