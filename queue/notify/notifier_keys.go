package notify

import "strings"

// keyedSubs are subscriptions to notifications about one key (an
// execution id) on a channel whose payloads list keys, comma-separated:
// a waiter wakes only for its own key, however busy the channel.
type keyedSubs map[string]map[string]map[chan struct{}]struct{} // channel → key → subscribers

// SubscribeKey returns a channel that receives a value after each
// notification on channel whose payload lists key (comma-separated), and
// a function that ends the subscription. After a reconnect it wakes too,
// since notifications sent meanwhile were lost.
func (n *Notifier) SubscribeKey(channel, key string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	n.mu.Lock()
	if n.keyed == nil {
		n.keyed = keyedSubs{}
	}
	if n.keyed[channel] == nil {
		n.keyed[channel] = map[string]map[chan struct{}]struct{}{}
	}
	if n.keyed[channel][key] == nil {
		n.keyed[channel][key] = map[chan struct{}]struct{}{}
	}
	n.keyed[channel][key][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.keyed[channel][key], ch)
		if len(n.keyed[channel][key]) == 0 {
			delete(n.keyed[channel], key)
		}
		n.mu.Unlock()
	}
}

// wakeKeys wakes the subscribers of every key listed in payload.
func (n *Notifier) wakeKeys(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	byKey := n.keyed[channel]
	if len(byKey) == 0 {
		return
	}
	for key := range strings.SplitSeq(payload, ",") {
		for ch := range byKey[key] {
			signal(ch)
		}
	}
}

// The keys of a targeted channel (Target) are left to their plain
// subscriptions: a key can say more than "look again" (a lease poll's
// "lease now"), and everyone woken at once must look first.
func (n *Notifier) wakeAllKeys() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for channel, byKey := range n.keyed {
		if n.targets[channel] != nil {
			continue
		}
		for _, subs := range byKey {
			for ch := range subs {
				signal(ch)
			}
		}
	}
}

// signal leaves one pending wakeup on ch.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// AfterCommit wakes this replica's subscribers of channel (and of keys on
// it) as the NOTIFY that a just-committed transaction sent would, but only
// while notifications are lost: that NOTIFY will not arrive, and the
// work's own replica need not wait for the next poll to see it (behind a
// transaction pooler a manual run's ?wait= would take two polls). With
// notifications arriving it does nothing: the NOTIFY wakes everyone once.
// A nil Notifier does nothing.
func (n *Notifier) AfterCommit(channel string, keys ...string) {
	if n == nil || !n.lost.Load() {
		return
	}
	n.wake(channel)
	if len(keys) > 0 {
		n.wakeKeys(channel, strings.Join(keys, ","))
	}
}
