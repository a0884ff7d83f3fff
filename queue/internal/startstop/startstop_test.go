package startstop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type ctxKey struct{}

// Stop cancels the goroutine's context, waits until it has returned, and
// does nothing the second time.
func TestStopCancelsAndWaits(t *testing.T) {
	var r Runner
	var returned atomic.Bool
	started := make(chan struct{})
	r.Start(context.Background(), func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		time.Sleep(20 * time.Millisecond) // work after cancel: Stop must wait for it
		returned.Store(true)
	})
	<-started
	r.Stop()
	require.True(t, returned.Load(), "Stop returned before the goroutine did")
	r.Stop()
}

// The goroutine's context keeps the caller's values but not its
// cancellation: cancelling the context Start was given does not stop the
// service, only Stop does.
func TestStartContextOutlivesTheCallers(t *testing.T) {
	var r Runner
	parent, cancel := context.WithCancel(context.WithValue(context.Background(), ctxKey{}, "v"))
	got := make(chan context.Context, 1)
	r.Start(parent, func(ctx context.Context) {
		got <- ctx
		<-ctx.Done()
	})
	ctx := <-got
	cancel()
	require.Equal(t, "v", ctx.Value(ctxKey{}))
	select {
	case <-ctx.Done():
		t.Fatal("the service's context was cancelled with the caller's")
	case <-time.After(20 * time.Millisecond):
	}
	r.Stop()
	require.Error(t, ctx.Err())
}

// Stop without Start returns at once.
func TestStopWithoutStart(t *testing.T) {
	var r Runner
	r.Stop()
}
