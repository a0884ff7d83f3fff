package openapi

import "github.com/google/uuid"

// LogTurns makes the API built from c call granted with the key of each
// call given its turn (fairTurns), in order, under the turns' lock.
func LogTurns(c *Config, granted func(keyID uuid.UUID)) {
	c.turnGranted = func(key [16]byte) { granted(uuid.UUID(key)) }
}
