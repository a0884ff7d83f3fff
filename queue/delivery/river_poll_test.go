package delivery

import (
	"testing"
	"time"
)

// TestCallbackQueuePollsAtAQuarterOfItsShortestWait: the callback queue is
// polled only as often as its retries need (a quarter of the shortest
// wait, within PollInterval and a second), not as often as the HTTP
// queue, whose poll is the start precision of requests fired ahead.
func TestCallbackQueuePollsAtAQuarterOfItsShortestWait(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  RiverConfig
		want time.Duration
	}{
		{"defaults: first retry 1 s", RiverConfig{}, 250 * time.Millisecond},
		{"a recheck of 200 ms: a quarter, but not under PollInterval (100 ms)", RiverConfig{Callback: CallbackConfig{HoldRecheck: 200 * time.Millisecond}},
			100 * time.Millisecond},
		{"never under PollInterval", RiverConfig{PollInterval: 10 * time.Millisecond,
			Callback: CallbackConfig{RetrySchedule: []time.Duration{10 * time.Millisecond}}}, 10 * time.Millisecond},
		{"at most a second", RiverConfig{Callback: CallbackConfig{HoldRecheck: time.Minute,
			RetrySchedule: []time.Duration{time.Minute}}}, time.Second},
		{"a PollInterval over a second wins", RiverConfig{PollInterval: 2 * time.Second}, 2 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.cfg.withDefaults().callbackPollInterval(); got != c.want {
				t.Errorf("callback queue polled every %s, want %s", got, c.want)
			}
		})
	}
}
