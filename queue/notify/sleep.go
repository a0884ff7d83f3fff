package notify

import (
	"context"
	"time"
)

// Sleep waits d, or less when ctx ends or wake or also fires (a nil
// channel never does).
func Sleep(ctx context.Context, d time.Duration, wake, also <-chan struct{}) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	case <-wake:
	case <-also:
	}
}
