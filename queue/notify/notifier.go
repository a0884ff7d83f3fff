package notify

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifier holds one LISTEN connection per replica and fans notifications
// out to any number of subscribers, so waiting loops and long polls cost no
// connection each. The connection is one of the pool's, held while it
// listens: a replica opens no more connections than its pool size.
// Wakeups coalesce: a subscriber that is busy sees one pending wakeup, not
// a queue. After a reconnect every subscriber is woken, since
// notifications sent meanwhile were lost.
type Notifier struct {
	pool     *pgxpool.Pool
	channels []string
	logger   *slog.Logger

	mu    sync.Mutex
	subs  map[string]map[chan struct{}]struct{}
	keyed keyedSubs // subscriptions to one payload of a channel
	// payloads are subscriptions to every payload of a channel.
	payloads payloadSubs

	bg startstop.Runner
}

// NewNotifier listens on channels through a connection of pool's.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger, channels ...string) *Notifier {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Notifier{
		pool:     pool,
		channels: channels,
		logger:   logger,
		subs:     map[string]map[chan struct{}]struct{}{},
	}
}

// Subscribe returns a channel that receives a value after each
// notification on channel, and a function that ends the subscription.
func (n *Notifier) Subscribe(channel string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.subs[channel] == nil {
		n.subs[channel] = map[chan struct{}]struct{}{}
	}
	n.subs[channel][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.subs[channel], ch)
		n.mu.Unlock()
	}
}

// Start connects and listens in the background until Stop.
func (n *Notifier) Start(ctx context.Context) error {
	n.bg.Start(ctx, n.run)
	return nil
}

// Stop ends listening and waits for the connection to close. It is safe
// to call twice or without Start.
func (n *Notifier) Stop() { n.bg.Stop() }

func (n *Notifier) run(ctx context.Context) {
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	for ctx.Err() == nil {
		// A connection that worked starts the next outage's backoff over.
		err := n.listen(ctx, func() { backoff = firstBackoff })
		if ctx.Err() != nil {
			return
		}
		n.logger.WarnContext(ctx, "notifier connection lost; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listen runs one connection until it fails; connected is called once it
// listens on every channel.
func (n *Notifier) listen(ctx context.Context, connected func()) error {
	pooled, err := n.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// Held, so the pool counts it, and closed before it is given back (it
	// listens, and it may have failed): the pool then drops it and opens
	// another when it needs one.
	conn := pooled.Conn()
	defer func() {
		conn.Close(context.WithoutCancel(ctx))
		pooled.Release()
	}()
	for _, ch := range n.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	connected()
	n.wakeAll()
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		n.wake(note.Channel)
		n.wakeKeys(note.Channel, note.Payload)
		n.sendPayload(note.Channel, note.Payload)
	}
}

func (n *Notifier) wake(channel string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.subs[channel] {
		select {
		case ch <- struct{}{}:
		default: // a wakeup is pending already
		}
	}
}

func (n *Notifier) wakeAll() {
	for _, ch := range n.channels {
		n.wake(ch)
	}
	n.wakeAllKeys()
}
