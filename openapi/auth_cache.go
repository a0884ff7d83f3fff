package openapi

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/ax-scheduler/ax/queue"
	"github.com/ax-scheduler/ax/queue/axtype"
)

// keyCacheTTL is how long an authenticated key is trusted without reading
// it again. A busy agent makes several calls a second; reading the key
// table for each cost two queries per task in BenchmarkEndToEnd, and an
// idle agent's heartbeat (every 5 s) read it each time under a shorter
// TTL (BenchmarkIdleCost). Every revocation NOTIFYs ax_api_key_revoked (a
// trigger) and replicas forget their cache on it, and on every reconnect
// of the listening connection (which may have missed one), so the TTL
// only bounds how long a revoked key works while that connection is down
// (or when the API runs without a notifier).
const keyCacheTTL = 30 * time.Second

// maxCached bounds both caches; past it they start over.
const maxCached = 10_000

// keyCache remembers authenticated API keys by secret hash for
// keyCacheTTL.
type keyCache struct {
	// revoked receives a value when a key was revoked anywhere (the
	// notifier's ax_api_key_revoked); nil: rely on the TTL.
	revoked <-chan struct{}

	mu      sync.Mutex
	entries map[[32]byte]cachedKey
}

type cachedKey struct {
	key *axtype.APIKey
	at  time.Time
}

// authenticate returns the key with this hash, from the cache when fresh.
func (c *keyCache) authenticate(ctx context.Context, keys *queue.KeyService, hash [32]byte) (*axtype.APIKey, error) {
	c.mu.Lock()
	select {
	case <-c.revoked: // some key was revoked: trust no cached one
		clear(c.entries)
	default:
	}
	entry, ok := c.entries[hash]
	c.mu.Unlock()
	if ok && time.Since(entry.at) < keyCacheTTL {
		return entry.key, nil
	}
	key, err := keys.Authenticate(ctx, hash)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= maxCached {
		c.entries = map[[32]byte]cachedKey{}
	}
	c.entries[hash] = cachedKey{key: key, at: time.Now()}
	return key, nil
}

// forget drops every cached entry of the key with this id: the replica
// that revoked a key (an agent's deregistration) must not wait for the
// revocation's NOTIFY, which arrives later, to stop trusting it.
func (c *keyCache) forget(keyID uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for hash, entry := range c.entries {
		if entry.key.ID == keyID {
			delete(c.entries, hash)
		}
	}
}

// forgetAll drops every cached key: revoking a key revokes the agent
// tokens it minted too, and this replica answers its next request before
// the revocation's NOTIFY arrives.
func (c *keyCache) forgetAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.entries)
}

// ownerCache remembers which API key each agent registered with: it never
// changes, so agent calls that only need to check ownership (heartbeat,
// complete, logs, release) skip reading the agent row.
type ownerCache struct {
	mu     sync.Mutex
	owners map[uuid.UUID]uuid.UUID
}

func (c *ownerCache) get(agentID uuid.UUID) (uuid.UUID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	owner, ok := c.owners[agentID]
	return owner, ok
}

func (c *ownerCache) put(agentID, keyID uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.owners == nil || len(c.owners) >= maxCached {
		c.owners = map[uuid.UUID]uuid.UUID{}
	}
	c.owners[agentID] = keyID
}
