package queue

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/ax-scheduler/ax/db"

	"github.com/ax-scheduler/ax/queue/axtype"
)

// Scopes an API key can carry. admin may do everything; submit may also
// read (a submitter needs the results); read and agent grant only
// themselves. The API decides what each scope grants; keys are checked
// against this list when they are stored.
const (
	ScopeAdmin  = "admin"
	ScopeSubmit = "submit"
	ScopeRead   = "read"
	ScopeAgent  = "agent"
)

// AllScopes lists the scopes a key may carry.
var AllScopes = []string{ScopeAdmin, ScopeSubmit, ScopeRead, ScopeAgent}

// keyPrefixLen is how much of a key listings show to tell keys apart.
const keyPrefixLen = 11

// Bounds of key limits: they are read on every request of the key.
const (
	maxKeyGroups      = 100
	maxKeyLabelValues = 100
	maxKeyNameLen     = 200
)

// NewAPIKeySecret returns a fresh key: "ax_" and 256 random bits.
func NewAPIKeySecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return "ax_" + base64.RawURLEncoding.EncodeToString(b)
}

// KeyLimits narrow what a key may do beyond its scopes.
type KeyLimits struct {
	// Labels binds an agent key to the labels its agents may declare: each
	// label of an agent must be listed here with its value. Only for keys
	// with scope agent (and not admin). Nil: any labels.
	Labels map[string][]string
	// Groups limits the key to the jobs and runs of these job groups: it
	// sees no other (404) and may create none elsewhere. Not for admin
	// keys. Nil: every group.
	Groups []string
	// MintedBy is the key that registered the agent this key is the token
	// of: revoking that key revokes this one.
	MintedBy *uuid.UUID
}

// KeyService stores API keys and looks them up by secret. Secrets are
// never stored: only their SHA-256 and a short prefix to tell keys apart.
type KeyService struct {
	pool *pgxpool.Pool
}

// NewKeyService returns a KeyService on pool.
func NewKeyService(pool *pgxpool.Pool) *KeyService {
	return &KeyService{pool: pool}
}

// Create stores a new key with scopes and limits and returns its secret,
// which is shown once and never stored.
func (s *KeyService) Create(ctx context.Context, name string, scopes []string, limits KeyLimits) (string, *axtype.APIKey, error) {
	p, secret, err := apiKeyParams(name, "", scopes)
	if err != nil {
		return "", nil, err
	}
	if err := limits.validate(scopes); err != nil {
		return "", nil, err
	}
	p.Labels, p.Groups, p.MintedBy = limits.Labels, limits.Groups, limits.MintedBy
	key, err := db.APIKeyInsert(ctx, s.pool, p)
	return secret, key, err
}

// Ensure stores secret as a key unless it is stored already; used for the
// bootstrap admin key of `ax serve` (AX_ADMIN_KEY).
func (s *KeyService) Ensure(ctx context.Context, name, secret string, scopes []string) error {
	if len(secret) < 20 {
		return fmt.Errorf("api key %q is too short: use at least 20 characters (ax key create makes good ones)", name)
	}
	p, _, err := apiKeyParams(name, secret, scopes)
	if err != nil {
		return err
	}
	return db.APIKeyEnsure(ctx, s.pool, p)
}

// Authenticate returns the live (not revoked) key whose secret has this
// SHA-256, or an error wrapping axtype.ErrNotFound.
func (s *KeyService) Authenticate(ctx context.Context, hash [32]byte) (*axtype.APIKey, error) {
	return db.APIKeyAuthenticate(ctx, s.pool, hash[:])
}

// KeyLimitsError says which limit of a new key is wrong: Field is labels
// or groups.
type KeyLimitsError struct {
	Field, Message string
}

func (e *KeyLimitsError) Error() string { return e.Field + ": " + e.Message }

func (l KeyLimits) validate(scopes []string) error {
	admin := slices.Contains(scopes, ScopeAdmin)
	if l.Labels != nil {
		if admin || !slices.Contains(scopes, ScopeAgent) {
			return &KeyLimitsError{Field: "labels", Message: "labels bind agent keys: use them with scope agent alone"}
		}
		if len(l.Labels) == 0 || len(l.Labels) > maxKeyLabelValues {
			return &KeyLimitsError{Field: "labels", Message: fmt.Sprintf("a label binding needs 1 to %d labels", maxKeyLabelValues)}
		}
		for k, vs := range l.Labels {
			if k == "" || len(k) > maxKeyNameLen || len(vs) == 0 || len(vs) > maxKeyLabelValues {
				return &KeyLimitsError{Field: "labels", Message: fmt.Sprintf("label %q: a name of 1 to %d characters and 1 to %d values", k, maxKeyNameLen, maxKeyLabelValues)}
			}
			for _, v := range vs {
				if len(v) > maxKeyNameLen {
					return &KeyLimitsError{Field: "labels", Message: fmt.Sprintf("label %q: values of at most %d characters", k, maxKeyNameLen)}
				}
			}
		}
	}
	if l.Groups != nil {
		if admin {
			return &KeyLimitsError{Field: "groups", Message: "an admin key may do everything: groups cannot limit it"}
		}
		if len(l.Groups) == 0 || len(l.Groups) > maxKeyGroups {
			return &KeyLimitsError{Field: "groups", Message: fmt.Sprintf("a group limit needs 1 to %d groups", maxKeyGroups)}
		}
		for _, g := range l.Groups {
			if g == "" || len(g) > maxKeyNameLen {
				return &KeyLimitsError{Field: "groups", Message: fmt.Sprintf("group %q: use 1 to %d characters", g, maxKeyNameLen)}
			}
		}
	}
	return nil
}

// ParseKeyLabels reads a label binding written k=v,k=v2,k2=v (a label
// may be listed with several values).
func ParseKeyLabels(s string) (map[string][]string, error) {
	labels := map[string][]string{}
	for item := range strings.SplitSeq(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		k, v, ok := strings.Cut(item, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" {
			return nil, fmt.Errorf("label %q is not k=v", item)
		}
		if !slices.Contains(labels[k], v) {
			labels[k] = append(labels[k], v)
		}
	}
	if len(labels) == 0 {
		return nil, nil
	}
	return labels, nil
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

// OpenConsoleSession opens a console session for key that ends after idle
// without use and after max at the latest. It returns the session's id,
// which only the visitor's cookie holds (the table keeps its SHA-256),
// and the session's CSRF token.
func (s *KeyService) OpenConsoleSession(ctx context.Context, key *axtype.APIKey, idle, max time.Duration) (id, csrf string, err error) {
	id, csrf = randomToken(), randomToken()
	hash := sha256.Sum256([]byte(id))
	if err := db.ConsoleSessionInsert(ctx, s.pool, hash[:], key.ID, csrf, idle, max); err != nil {
		return "", "", err
	}
	return id, csrf, nil
}

// ConsoleSession returns the live session with this id, or an error
// wrapping axtype.ErrNotFound, and keeps it alive for idle more.
func (s *KeyService) ConsoleSession(ctx context.Context, id string, idle time.Duration) (*axtype.ConsoleSession, error) {
	hash := sha256.Sum256([]byte(id))
	return db.ConsoleSessionGet(ctx, s.pool, hash[:], idle)
}

// CloseConsoleSession ends the session with this id (logout).
func (s *KeyService) CloseConsoleSession(ctx context.Context, id string) error {
	hash := sha256.Sum256([]byte(id))
	return db.ConsoleSessionDelete(ctx, s.pool, hash[:])
}

// randomToken is 256 random bits, URL-safe.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// List returns up to max keys, revoked ones included, oldest first, after
// the key after (nil: from the first); an error wrapping
// axtype.ErrNotFound when after is no key.
func (s *KeyService) List(ctx context.Context, after *uuid.UUID, max int) ([]*axtype.APIKey, error) {
	return db.APIKeyList(ctx, s.pool, after, max)
}

// Revoke revokes a live key and the agent tokens it minted; an error
// wrapping db.ErrNotFound when no live key has that id.
func (s *KeyService) Revoke(ctx context.Context, id uuid.UUID) error {
	return db.APIKeyRevoke(ctx, s.pool, id)
}
