package notify

// payloadSubs are subscriptions to the payloads of a channel.
type payloadSubs map[string]map[chan string]struct{} // channel → subscribers

// SubscribePayloads returns a channel that receives the payload of each
// notification on channel, buffering up to buffer of them, and a function
// that ends the subscription. A payload that finds the buffer full is
// dropped (the listening connection never waits on a subscriber), and
// notifications sent while the connection was down are lost: a
// subscriber must not rely on seeing every one.
func (n *Notifier) SubscribePayloads(channel string, buffer int) (<-chan string, func()) {
	ch := make(chan string, max(buffer, 1))
	n.mu.Lock()
	if n.payloads == nil {
		n.payloads = payloadSubs{}
	}
	if n.payloads[channel] == nil {
		n.payloads[channel] = map[chan string]struct{}{}
	}
	n.payloads[channel][ch] = struct{}{}
	n.mu.Unlock()
	return ch, func() {
		n.mu.Lock()
		delete(n.payloads[channel], ch)
		n.mu.Unlock()
	}
}

// sendPayload hands payload to the channel's payload subscribers.
func (n *Notifier) sendPayload(channel, payload string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for ch := range n.payloads[channel] {
		select {
		case ch <- payload:
		default: // full: dropped rather than stall the listener
		}
	}
}
