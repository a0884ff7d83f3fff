package notify

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// targets are the channels whose notifications name whom they are for
// (Target): channel → how soon the channel's other subscribers look too.
type targets map[string]*target

type target struct {
	late  time.Duration
	timer *time.Timer // the other subscribers' wake-up to come; nil: none
}

// Target makes channel a targeted one: a notification whose payload lists
// keys wakes the subscribers of those keys (SubscribeKey) at once, and the
// channel's plain subscribers (Subscribe) within late rather than at
// once; one with an empty payload, for everyone, wakes the plain
// subscribers at once and no key's, and so do a reconnect and the polls
// while notifications are lost (a subscriber of keys that wants to hear
// those subscribes plainly too: a key can say more, as "lease now"). A task-ready notification names the agents its tasks are
// routed to: the other waiting polls need only look when those tasks may
// be stolen (AgentConfig.StealAfter). With 200 agents waiting, each fire
// woke all 200 polls to check whether they could lease: a check each, for
// the one or two the fire was for.
func (n *Notifier) Target(channel string, late time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.targets == nil {
		n.targets = targets{}
	}
	n.targets[channel] = &target{late: late}
}

// wakeFor wakes the subscribers a notification on channel is for.
func (n *Notifier) wakeFor(channel, payload string) {
	n.mu.Lock()
	t := n.targets[channel]
	n.mu.Unlock()
	switch {
	case t == nil:
		n.wake(channel)
		n.wakeKeys(channel, payload)
		return
	case payload == "":
		n.wake(channel)
		return
	}
	n.wakeKeys(channel, payload)
	n.wakeLate(channel, t)
}

// wakeLate wakes channel's plain subscribers t.late from now, unless a
// wake-up of them is due already: it comes after this notification's
// work was committed and within t.late of it, and whoever it wakes looks
// at that work too.
func (n *Notifier) wakeLate(channel string, t *target) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if t.timer != nil {
		return
	}
	t.timer = time.AfterFunc(t.late, func() {
		n.mu.Lock()
		t.timer = nil
		n.mu.Unlock()
		n.wake(channel)
	})
}

// stopLate stops the late wake-ups to come (the notifier's end).
func (n *Notifier) stopLate() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, t := range n.targets {
		if t.timer != nil {
			t.timer.Stop()
			t.timer = nil
		}
	}
}

// MaxTargets is the most keys a targeted notification names (Payload):
// 100 keys of an agent id and a prefix take at most 4,300 bytes of the
// 8,000 a NOTIFY payload may carry.
const MaxTargets = 100

// Targets collects whom a targeted notification is for: keys, or everyone.
// The zero value names no one; its payload is everyone's, as is that of
// any notification that does not say.
type Targets struct {
	keys     map[string]struct{}
	everyone bool
}

// Add makes the notification for key; "" makes it for everyone.
func (t *Targets) Add(key string) {
	if key == "" {
		t.everyone = true
		return
	}
	if t.keys == nil {
		t.keys = map[string]struct{}{}
	}
	t.keys[key] = struct{}{}
}

// Payload is the notification's payload: the keys comma-separated, or ""
// (everyone) when it is for everyone, for no key in particular, or for
// more than MaxTargets keys.
func (t *Targets) Payload() string {
	if t.everyone || len(t.keys) > MaxTargets {
		return ""
	}
	return strings.Join(slices.Sorted(maps.Keys(t.keys)), ",")
}
