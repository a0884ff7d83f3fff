package notify

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-scheduler/ax/queue/internal/startstop"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Notifier holds one LISTEN connection per replica and fans notifications
// out to any number of subscribers, so waiting loops and long polls cost no
// connection each. The connection is one of the pool's, held while it
// listens (a replica opens no more connections than its pool size), or,
// with NotifierConfig.DirectURL, one of its own to the database itself.
// Wakeups coalesce: a subscriber that is busy sees one pending wakeup, not
// a queue. After a reconnect every subscriber is woken, since
// notifications sent meanwhile were lost.
//
// Notifications can also be lost without a lost connection: behind a
// transaction-mode pooler a LISTEN holds for one transaction only. So
// the Notifier checks delivery with a NOTIFY to itself, sent through the
// pool, after each connect and every ProbeEvery; while one goes
// unanswered (or from the start, when told notifications cannot arrive),
// it wakes every subscriber every PollEvery instead, which bounds their
// lag, says so in a warning and in Lost, and reports it by Degraded.
type Notifier struct {
	pool     *pgxpool.Pool
	channels []string
	cfg      NotifierConfig

	mu    sync.Mutex
	subs  map[string]map[chan struct{}]struct{}
	keyed keyedSubs // subscriptions to one payload of a channel
	// targets are the channels whose notifications wake whom they name
	// (Target).
	targets targets
	// payloads are subscriptions to every payload of a channel.
	payloads payloadSubs

	lost      atomic.Bool            // notifications do not arrive: subscribers are polled
	probeWant atomic.Pointer[string] // payload of the probe in flight
	probeBack chan struct{}          // a value when it came back
	connected chan struct{}          // a value after each connect that listens

	bg startstop.Runner
}

// ProbeChannel carries the Notifier's NOTIFYs to itself.
const ProbeChannel = "ax_notify_probe"

// NotifierConfig tunes a Notifier.
type NotifierConfig struct {
	// Logger defaults to discarding.
	Logger *slog.Logger
	// DirectURL, when set, is a connection string of the database itself
	// (not a pooler): the Notifier listens on a connection of its own
	// to it, since LISTEN does not survive a transaction pooler.
	DirectURL string
	// NoDelivery says notifications cannot arrive (the pool goes
	// through a transaction pooler and there is no DirectURL): the
	// Notifier does not listen and polls from the start.
	NoDelivery bool
	// ProbeEvery is how often delivery is checked while listening.
	// Defaults to 30 seconds.
	ProbeEvery time.Duration
	// ProbeTimeout is how long a probe's NOTIFY may take to come back
	// before notifications count as lost. Defaults to 2 seconds (under
	// heavy write load delivery takes tens of milliseconds).
	ProbeTimeout time.Duration
	// PollEvery is how often every subscriber is woken while
	// notifications are lost. Defaults to 250 ms (a manual run then ends
	// within about two: one for its agent's lease, one for the caller's
	// wait); at most 1 s.
	PollEvery time.Duration
	// Lost, when set, is 1 while notifications are lost, else 0.
	Lost prometheus.Gauge
}

// MaxPollEvery bounds NotifierConfig.PollEvery: a lost notification
// delays no subscriber longer.
const MaxPollEvery = time.Second

func (c NotifierConfig) withDefaults() NotifierConfig {
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	c.ProbeEvery = cmp.Or(c.ProbeEvery, 30*time.Second)
	c.ProbeTimeout = cmp.Or(c.ProbeTimeout, 2*time.Second)
	c.PollEvery = min(cmp.Or(c.PollEvery, 250*time.Millisecond), MaxPollEvery)
	return c
}

// NewNotifier listens on channels through a connection of pool's.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger, channels ...string) *Notifier {
	return NewNotifierWith(pool, NotifierConfig{Logger: logger}, channels...)
}

// NewNotifierWith listens on channels as cfg says; its probes go
// through pool.
func NewNotifierWith(pool *pgxpool.Pool, cfg NotifierConfig, channels ...string) *Notifier {
	return &Notifier{
		pool:      pool,
		channels:  channels,
		cfg:       cfg.withDefaults(),
		subs:      map[string]map[chan struct{}]struct{}{},
		probeBack: make(chan struct{}, 1),
		connected: make(chan struct{}, 1),
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

// Degraded says, when notifications are lost and subscribers polled
// instead, why and how often; "" while they arrive.
func (n *Notifier) Degraded() string {
	if !n.lost.Load() {
		return ""
	}
	if n.cfg.NoDelivery {
		return fmt.Sprintf("notifications cannot arrive through a transaction pooler and no direct database URL "+
			"(AX_DIRECT_DATABASE_URL) is set: polling every %s", n.cfg.PollEvery)
	}
	return fmt.Sprintf("notifications are not arriving (a probe NOTIFY did not come back): polling every %s",
		n.cfg.PollEvery)
}

// Start connects and listens in the background until Stop.
func (n *Notifier) Start(ctx context.Context) error {
	if n.cfg.NoDelivery {
		n.setLost(ctx, true, "notifications cannot arrive through a transaction pooler; set AX_DIRECT_DATABASE_URL "+
			"to a direct connection for instant wakeups")
	}
	n.bg.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { n.poll(ctx) })
		if !n.cfg.NoDelivery {
			wg.Go(func() { n.probe(ctx) })
			n.run(ctx)
		}
		wg.Wait()
	})
	return nil
}

// Stop ends listening and waits for the connection to close. It is safe
// to call twice or without Start.
func (n *Notifier) Stop() {
	n.bg.Stop()
	n.stopLate()
}

func (n *Notifier) run(ctx context.Context) {
	const firstBackoff = 100 * time.Millisecond
	backoff := firstBackoff
	for ctx.Err() == nil {
		// A connection that worked starts the next outage's backoff over.
		err := n.listen(ctx, func() { backoff = firstBackoff })
		if ctx.Err() != nil {
			return
		}
		n.cfg.Logger.WarnContext(ctx, "notifier connection lost; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// listenConn is the connection the Notifier listens on and what gives it
// back.
type listenConn struct {
	conn    *pgx.Conn
	release func()
}

// connect opens the connection to listen on: a direct one of its own, or
// one of the pool's, held, and closed before it is given back (it
// listens, and it may have failed): the pool then drops it and opens
// another when it needs one.
func (n *Notifier) connect(ctx context.Context) (listenConn, error) {
	if n.cfg.DirectURL != "" {
		conn, err := pgx.Connect(ctx, n.cfg.DirectURL)
		if err != nil {
			return listenConn{}, err
		}
		return listenConn{conn: conn, release: func() { conn.Close(context.WithoutCancel(ctx)) }}, nil
	}
	pooled, err := n.pool.Acquire(ctx)
	if err != nil {
		return listenConn{}, err
	}
	conn := pooled.Conn()
	return listenConn{conn: conn, release: func() {
		conn.Close(context.WithoutCancel(ctx))
		pooled.Release()
	}}, nil
}

// listen runs one connection until it fails; connected is called once it
// listens on every channel.
func (n *Notifier) listen(ctx context.Context, connected func()) error {
	lc, err := n.connect(ctx)
	if err != nil {
		return err
	}
	defer lc.release()
	conn := lc.conn
	for _, ch := range append([]string{ProbeChannel}, n.channels...) {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	connected()
	signal(n.connected)
	n.wakeAll()
	for {
		note, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if note.Channel == ProbeChannel {
			if want := n.probeWant.Load(); want != nil && *want == note.Payload {
				signal(n.probeBack)
			} // else an old probe's, or another replica's
			continue
		}
		n.wakeFor(note.Channel, note.Payload)
		n.sendPayload(note.Channel, note.Payload)
	}
}

// probe sends a NOTIFY to itself through the pool after each connect and
// every ProbeEvery, and marks notifications lost while one does not come
// back within ProbeTimeout.
func (n *Notifier) probe(ctx context.Context) {
	t := time.NewTimer(n.cfg.ProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.connected:
		case <-t.C:
		}
		t.Reset(n.cfg.ProbeEvery)
		arrived, err := n.probeOnce(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			// Not a verdict on delivery: the pool failed, the listener
			// reconnects on its own.
			n.cfg.Logger.WarnContext(ctx, "error sending a notification probe", "error", err)
		case !arrived:
			n.setLost(ctx, true, "a probe NOTIFY did not come back: notifications are lost (a transaction "+
				"pooler between ax and Postgres?); set AX_DIRECT_DATABASE_URL to a direct connection")
		default:
			n.setLost(ctx, false, "")
		}
	}
}

// probeOnce sends one probe and waits for it.
func (n *Notifier) probeOnce(ctx context.Context) (bool, error) {
	payload := probeToken()
	n.probeWant.Store(&payload)
	select {
	case <-n.probeBack: // an earlier probe's, late
	default:
	}
	if _, err := n.pool.Exec(ctx, "SELECT pg_notify($1, $2)", ProbeChannel, payload); err != nil {
		return false, err
	}
	deadline := time.NewTimer(n.cfg.ProbeTimeout)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-deadline.C:
			return false, nil
		case <-n.probeBack:
			return true, nil
		}
	}
}

// setLost records whether notifications are lost; a change is logged
// (why as a warning when lost) and shown by Lost.
func (n *Notifier) setLost(ctx context.Context, lost bool, why string) {
	if n.cfg.Lost != nil {
		value := 0.0
		if lost {
			value = 1
		}
		n.cfg.Lost.Set(value)
	}
	if n.lost.Swap(lost) == lost {
		return
	}
	if lost {
		n.cfg.Logger.WarnContext(ctx, why, "poll_every", n.cfg.PollEvery)
		return
	}
	n.cfg.Logger.InfoContext(ctx, "notifications arrive again; polling stopped")
}

// poll wakes every subscriber every PollEvery while notifications are
// lost, so none waits for one longer than that.
func (n *Notifier) poll(ctx context.Context) {
	t := time.NewTicker(n.cfg.PollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n.lost.Load() {
				n.wakeAll()
			}
		}
	}
}

// probeToken is a payload no other probe carries.
func probeToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
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
