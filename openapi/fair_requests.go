package openapi

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// maxWaitingPerKey is how many requests of one API key may wait for a
// turn at once on a replica; the next is answered 429 at once, so a
// flood of one key costs the replica a bounded queue.
const maxWaitingPerKey = 64

// errTooManyWaiting refuses a request of a key that has maxWaitingPerKey
// waiting already.
var errTooManyWaiting = errors.New("too many requests of this API key are waiting")

// fairTurns admits the API's calls that read or write the database (all
// but the agents', which have the engine's pool) a few at a time
// (TurnsFor the request pool's connections), and while calls wait, takes
// them key by key in turn, each key's in the order they came. The
// request pool hands its connections out first come, first served: one
// key's hundred slow calls (large history pages) made every other key's
// call wait for all of them. Now another key's call waits for the calls
// already running and one turn of each key ahead of it at most. A call
// takes its turn after its body is read and validated (a slow sender
// holds no turn) and gives it back when its handler returns, or while it
// waits for something else (a run's end, name lookups).
type fairTurns struct {
	mu      sync.Mutex
	free    int                      // turns not held
	waiting map[uuid16][]*turnWaiter // per key, oldest first
	ring    []uuid16                 // the keys with calls waiting, in the order they go next
	granted func(key uuid16)         // tests: each turn given, in order (nil: none)
	observe TurnObserver
}

// TurnObserver hears the turns' waits and refusals (ax serve's metrics:
// ax_api_turn_wait_seconds, ax_api_turns_refused_total).
type TurnObserver interface {
	APITurnWaited(time.Duration)
	APITurnRefused()
}

type noTurnObserver struct{}

func (noTurnObserver) APITurnWaited(time.Duration) {}
func (noTurnObserver) APITurnRefused()             {}

// uuid16 is an API key's id as a map key.
type uuid16 = [16]byte

type turnWaiter struct {
	granted chan struct{} // closed when the call has its turn
}

func newFairTurns(slots int, granted func(key uuid16), observe TurnObserver) *fairTurns {
	if granted == nil {
		granted = func(uuid16) {}
	}
	if observe == nil {
		observe = noTurnObserver{}
	}
	return &fairTurns{free: slots, waiting: map[uuid16][]*turnWaiter{}, granted: granted, observe: observe}
}

// acquire waits for a turn for a call of key, until ctx ends; capped,
// it refuses the call when maxWaitingPerKey of the key's wait already (a
// long poll coming back for its turn is not: its run has ended, and it
// held a turn before).
func (f *fairTurns) acquire(ctx context.Context, key uuid16, capped bool) error {
	began := time.Now()
	defer func() { f.observe.APITurnWaited(time.Since(began)) }()
	f.mu.Lock()
	if f.free > 0 && len(f.ring) == 0 {
		f.free--
		f.granted(key)
		f.mu.Unlock()
		return nil
	}
	q := f.waiting[key]
	if capped && len(q) >= maxWaitingPerKey {
		f.mu.Unlock()
		f.observe.APITurnRefused()
		return errTooManyWaiting
	}
	w := &turnWaiter{granted: make(chan struct{})}
	if len(q) == 0 {
		f.ring = append(f.ring, key)
	}
	f.waiting[key] = append(q, w)
	f.mu.Unlock()

	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-w.granted: // granted as the context ended: pass the turn on
		f.releaseLocked()
		return ctx.Err()
	default:
	}
	q = f.waiting[key]
	for i, x := range q {
		if x == w {
			q = append(q[:i], q[i+1:]...)
			break
		}
	}
	if len(q) > 0 {
		f.waiting[key] = q
		return ctx.Err()
	}
	delete(f.waiting, key)
	for i, k := range f.ring {
		if k == key {
			f.ring = append(f.ring[:i], f.ring[i+1:]...)
			break
		}
	}
	return ctx.Err()
}

// release gives a turn back: to the next key's oldest waiting call, that
// key going to the end of the ring, or to the free turns.
func (f *fairTurns) release() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.releaseLocked()
}

func (f *fairTurns) releaseLocked() {
	if len(f.ring) == 0 {
		f.free++
		return
	}
	key := f.ring[0]
	f.ring = f.ring[1:]
	q := f.waiting[key]
	w := q[0]
	if len(q) > 1 {
		f.waiting[key] = q[1:]
		f.ring = append(f.ring, key)
	} else {
		delete(f.waiting, key)
	}
	f.granted(key)
	close(w.granted)
}

// heldTurn is the turn a call holds, in its context: a handler that waits
// for something other than the database gives it back meanwhile
// (awayFromTurn).
type heldTurn struct {
	turns *fairTurns
	key   uuid16
	held  bool
}

type (
	heldTurnKey  struct{}
	fairTurnsKey struct{}
)

// awayFromTurn gives the call's turn back while it waits (a long poll)
// and returns the function that takes a turn again after the wait (its
// error: the call's context ended first); both do nothing for a call that
// holds none.
func awayFromTurn(ctx context.Context) (back func() error) {
	h, ok := ctx.Value(heldTurnKey{}).(*heldTurn)
	if !ok || !h.held {
		return func() error { return nil }
	}
	h.turns.release()
	h.held = false
	return func() error {
		if err := h.turns.acquire(ctx, h.key, false); err != nil {
			return err
		}
		h.held = true
		return nil
	}
}

// awayWhile runs f, which waits for something other than the database
// (name lookups of the URLs a call names), away from the call's turn.
// Taking the turn back fails only when the call's context has ended,
// and then its database work fails anyway.
func awayWhile(ctx context.Context, f func()) {
	back := awayFromTurn(ctx)
	f()
	_ = back()
}

// register is huma.Register with fair turns: the handler of an operation
// that needs a key of any scope but agent runs in its caller's turn
// (fairTurns, which the authenticator puts in the context).
func register[I, O any](api huma.API, op huma.Operation, handler func(context.Context, *I) (*O, error)) {
	scope, _ := op.Metadata[scopeMetadataKey].(string)
	if scope == "" || scope == ScopeAgent {
		huma.Register(api, op, handler)
		return
	}
	if !slices.Contains(op.Errors, http.StatusTooManyRequests) {
		op.Errors = append(slices.Clip(op.Errors), http.StatusTooManyRequests) // tooManyWaiting, in the spec
	}
	huma.Register(api, op, func(ctx context.Context, in *I) (*O, error) {
		turns, _ := ctx.Value(fairTurnsKey{}).(*fairTurns)
		key, ok := ctx.Value(principalKey{}).(*axtype.APIKey)
		if turns == nil || !ok {
			return handler(ctx, in)
		}
		if _, held := ctx.Value(heldTurnKey{}).(*heldTurn); held {
			return handler(ctx, in) // a call the API makes on itself within a call that has its turn
		}
		h := &heldTurn{turns: turns, key: uuid16(key.ID)}
		if err := turns.acquire(ctx, h.key, true); err != nil {
			if errors.Is(err, errTooManyWaiting) {
				return nil, tooManyWaiting()
			}
			return nil, huma.Error503ServiceUnavailable("the request ended while it waited for its turn")
		}
		h.held = true
		defer func() {
			if h.held {
				turns.release()
			}
		}()
		return handler(context.WithValue(ctx, heldTurnKey{}, h), in)
	})
}

// tooManyWaiting is the 429 of a key with maxWaitingPerKey calls waiting.
func tooManyWaiting() error {
	return huma.ErrorWithHeaders(huma.NewError(http.StatusTooManyRequests,
		"this API key has "+strconv.Itoa(maxWaitingPerKey)+" requests waiting on this replica: retry after a second"),
		http.Header{"Retry-After": []string{"1"}})
}
