package openapi

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/db"
)

// keyPrefixLen is how much of a key listings show to tell keys apart.
const keyPrefixLen = 11

// AllScopes lists the scopes a key may carry.
var AllScopes = []string{ScopeAdmin, ScopeSubmit, ScopeRead, ScopeAgent}

// NewAPIKeySecret returns a fresh key: "ax_" and 256 random bits.
func NewAPIKeySecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "ax_" + base64.RawURLEncoding.EncodeToString(b)
}

// CreateAPIKey stores a new key with scopes and returns its secret, which
// is shown once and never stored.
func CreateAPIKey(ctx context.Context, e db.Executor, name string, scopes []string) (string, *db.APIKey, error) {
	p, secret, err := apiKeyParams(name, "", scopes)
	if err != nil {
		return "", nil, err
	}
	key, err := db.APIKeyInsert(ctx, e, p)
	return secret, key, err
}

// EnsureAPIKey stores secret as a key unless it is stored already; used
// for the bootstrap admin key of `ax serve` (AX_ADMIN_KEY).
func EnsureAPIKey(ctx context.Context, e db.Executor, name, secret string, scopes []string) error {
	if len(secret) < 20 {
		return fmt.Errorf("api key %q is too short: use at least 20 characters (ax key create makes good ones)", name)
	}
	p, _, err := apiKeyParams(name, secret, scopes)
	if err != nil {
		return err
	}
	return db.APIKeyEnsure(ctx, e, p)
}

func apiKeyParams(name, secret string, scopes []string) (*db.APIKeyInsertParams, string, error) {
	if len(scopes) == 0 {
		return nil, "", fmt.Errorf("an api key needs at least one scope of %s", strings.Join(AllScopes, ", "))
	}
	for _, s := range scopes {
		if !slices.Contains(AllScopes, s) {
			return nil, "", fmt.Errorf("unknown scope %q: use %s", s, strings.Join(AllScopes, ", "))
		}
	}
	if secret == "" {
		secret = NewAPIKeySecret()
	}
	id, err := uuid.NewV7()
	if err != nil {
		return nil, "", fmt.Errorf("error generating key id: %w", err)
	}
	hash := sha256.Sum256([]byte(secret))
	return &db.APIKeyInsertParams{ID: id, Name: name, Hash: hash[:],
		Prefix: secret[:min(keyPrefixLen, len(secret))], Scopes: scopes}, secret, nil
}
