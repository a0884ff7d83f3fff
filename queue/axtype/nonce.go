package axtype

import "time"

// NonceCheck is what the database says of a signed request's timestamp
// and nonce.
type NonceCheck struct {
	FreshTimestamp bool      // within the window of the database clock
	FreshNonce     bool      // not seen within the window: recorded now
	ServerTime     time.Time // the database clock
}
