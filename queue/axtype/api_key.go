package axtype

import (
	"time"

	"github.com/google/uuid"
)

// APIKey is a stored API key; the secret itself is never stored.
type APIKey struct {
	ID     uuid.UUID
	Name   string
	Prefix string
	Scopes []string
	// Labels binds an agent key: its agents may declare only these labels,
	// each with one of the listed values. Nil: any labels.
	Labels map[string][]string
	// Groups limits the key to the jobs and runs of these job groups. Nil:
	// every group.
	Groups []string
	// MintedBy is the key that registered the agent this key belongs to;
	// revoking that key revokes this one. Nil for keys made by operators.
	MintedBy   *uuid.UUID
	CreatedAt  time.Time
	LastUsedAt *time.Time
	RevokedAt  *time.Time
}
