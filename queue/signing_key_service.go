package queue

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// signingSecretPrefix marks signing secrets; the whole text is the HMAC
// key, so curl users sign with `openssl dgst -sha256 -hmac "$secret"`.
const signingSecretPrefix = "axsig_"

// SigningKeyService stores the keys of HMAC-signed requests and the nonces
// they used. A signing key acts for an API key, with its scopes and
// limits; unlike an API key its secret is stored, since the server needs
// it to check signatures.
type SigningKeyService struct {
	pool *pgxpool.Pool
}

// NewSigningKeyService returns a SigningKeyService on pool.
func NewSigningKeyService(pool *pgxpool.Pool) *SigningKeyService {
	return &SigningKeyService{pool: pool}
}

// Create stores a signing key acting for an API key and returns its id and
// secret; the secret is shown once.
func (s *SigningKeyService) Create(ctx context.Context, apiKeyID uuid.UUID) (uuid.UUID, string, error) {
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	id, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, "", fmt.Errorf("error generating signing key id: %w", err)
	}
	if err := db.APISigningKeyInsert(ctx, s.pool, id, apiKeyID, raw); err != nil {
		return uuid.Nil, "", err
	}
	return id, signingSecretText(raw), nil
}

// Get returns a live signing key's secret (the HMAC key) and the API key
// it acts for; an error wrapping axtype.ErrNotFound when the signing key or
// its API key is unknown or revoked.
func (s *SigningKeyService) Get(ctx context.Context, id uuid.UUID) (string, *axtype.APIKey, error) {
	sk, err := db.APISigningKeyGet(ctx, s.pool, id)
	if err != nil {
		return "", nil, err
	}
	return signingSecretText(sk.Secret), sk.APIKey, nil
}

// UseNonce checks a signed request's timestamp against the database clock
// (within window either way) and records its nonce for as long as the
// timestamp is acceptable; the answer says which of the two was fresh.
func (s *SigningKeyService) UseNonce(ctx context.Context, keyID uuid.UUID, nonce string, timestamp int64, window time.Duration) (axtype.NonceCheck, error) {
	return db.NonceUse(ctx, s.pool, keyID, nonce, timestamp, window)
}

func signingSecretText(raw []byte) string {
	return signingSecretPrefix + base64.RawURLEncoding.EncodeToString(raw)
}
