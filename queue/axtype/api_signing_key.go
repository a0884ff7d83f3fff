package axtype

import "github.com/google/uuid"

// SigningKey is a secret for HMAC-signed requests, acting for an API key.
type SigningKey struct {
	ID     uuid.UUID
	Secret []byte
	APIKey *APIKey // id, name, scopes, labels and groups of the key it acts for
}
