package schedule

import (
	"context"
	"log/slog"
	"time"

	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/ax-scheduler/ax/queue/notify"
)

// passLoop is how the after-firer and the backfill releaser run: a pass,
// then a wait of at least minSleep, and then until a notification on one
// of channels (at most two; none without a notifier) or maxSleep, until
// bg stops. A failed pass is logged with msg; the next comes as usual. A
// pass that stopped at its task bound with work left (more) is followed
// by the next at once.
type passLoop struct {
	notifier           *notify.Notifier
	channels           []string
	minSleep, maxSleep time.Duration
	logger             *slog.Logger
	msg                string
	pass               func(context.Context) (made int, more bool, err error)
}

// start runs the loop in bg until bg stops.
func (l passLoop) start(ctx context.Context, bg *startstop.Runner) {
	var wake [2]<-chan struct{}
	var stops []func()
	if l.notifier != nil {
		for i, ch := range l.channels[:min(len(l.channels), len(wake))] {
			var stop func()
			wake[i], stop = l.notifier.Subscribe(ch)
			stops = append(stops, stop)
		}
	}
	bg.Start(ctx, func(ctx context.Context) {
		defer func() {
			for _, stop := range stops {
				stop()
			}
		}()
		for ctx.Err() == nil {
			_, more, err := l.pass(ctx)
			if err != nil && ctx.Err() == nil {
				l.logger.ErrorContext(ctx, l.msg, "error", err)
			}
			if more {
				continue
			}
			notify.Sleep(ctx, l.minSleep, nil, nil)
			notify.Sleep(ctx, l.maxSleep, wake[0], wake[1])
		}
	})
}
