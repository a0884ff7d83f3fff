// Package startstop runs the one goroutine behind a background service's
// Start and Stop.
package startstop

import (
	"context"
	"sync"
)

// Runner is the one goroutine behind a service's Start and Stop.
// Stop cancels it and waits for it to return; it is safe to call twice or
// without start.
type Runner struct {
	stopOnce sync.Once
	cancel   context.CancelFunc
	done     chan struct{}
}

// Start runs fn in a goroutine with a context that Stop cancels (and that
// outlives ctx's cancellation, so shutdown order stays with the caller).
func (b *Runner) Start(ctx context.Context, fn func(ctx context.Context)) {
	ctx, b.cancel = context.WithCancel(context.WithoutCancel(ctx))
	b.done = make(chan struct{})
	go func() {
		defer close(b.done)
		fn(ctx)
	}()
}

// Stop cancels the goroutine and waits for it to return.
func (b *Runner) Stop() {
	b.stopOnce.Do(func() {
		if b.cancel != nil {
			b.cancel()
			<-b.done
		}
	})
}
