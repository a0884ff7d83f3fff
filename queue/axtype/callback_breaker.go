package axtype

import "time"

// BreakerAdmission is what a breaker says to one delivery.
type BreakerAdmission struct {
	State     BreakerState // before the call
	Probe     bool         // this delivery is the half-open probe
	OpenUntil time.Time    // while open
	Failures  int          // consecutive failures counted
	Now       time.Time    // the database clock
}

// Breaker is the circuit breaker state of one callback host.
type Breaker struct {
	Host  string
	State BreakerState // closed, open or half_open
}
