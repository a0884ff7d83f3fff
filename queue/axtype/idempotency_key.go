package axtype

import (
	"time"

	"github.com/google/uuid"
)

// IdempotencyRecord is the remembered outcome of a request made with an
// Idempotency-Key.
type IdempotencyRecord struct {
	APIKeyID       uuid.UUID
	Key            string
	Method, Path   string
	RequestHash    []byte
	ResponseStatus int
	ResponseBody   []byte
}

// IdempotentRequest is a mutating request made with an Idempotency-Key.
type IdempotentRequest struct {
	APIKeyID     uuid.UUID
	Key          string
	Method, Path string
	RequestHash  []byte
}

// IdempotentResponse is what a key's record holds: the request that used
// it and, once answered, the response.
type IdempotentResponse struct {
	Method, Path string
	RequestHash  []byte
	Status       int // 0 while the first request still runs
	Body         []byte
	Headers      []byte // JSON object of header name to value
}

// IdempotencyClaim is one key of a batch claim: the request it guards
// (path and hash), the response a replay gets, and how long it lives.
type IdempotencyClaim struct {
	Key          string
	Path         string
	RequestHash  []byte
	ResponseBody []byte
	ExpiresAt    time.Time
}
