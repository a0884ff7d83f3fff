package axtype

import "time"

// CallbackAttempt is one recorded delivery attempt.
type CallbackAttempt struct {
	Delivery, Attempt int
	URL               string
	At                time.Time
	StatusCode        int // 0: no answer
	Latency           time.Duration
	Error             string
}
