package delivery_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/ax-scheduler/ax/queue/delivery"
)

// The cleanup prunes what is past the history horizon (db.PruneGone,
// whose rules its own test checks): here an agent offline for 40 days,
// with its token, goes at the next pass, and one offline for a day stays.
func TestCleanupPrunesAgentsGonePastTheHorizon(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *delivery.RiverConfig) { c.CleanupInterval = time.Second })
	ctx := context.Background()
	var registrar uuid.UUID
	require.NoError(t, env.pool.QueryRow(ctx, `INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes)
		VALUES ('registrar', sha256('registrar'), 'ax_reg', '{agent}') RETURNING id`).Scan(&registrar))
	agent := func(name string, daysAgo int) (id, token uuid.UUID) {
		t.Helper()
		require.NoError(t, env.pool.QueryRow(ctx, `
			WITH k AS (
			    INSERT INTO ax.api_key (name, key_hash, key_prefix, scopes, minted_by)
			    VALUES ('agent:' || $1, sha256($1::bytea), 'ax_tok', '{agent}', $2) RETURNING id
			)
			INSERT INTO ax.agent (id, name, capacity, api_key_id, registered_by, executors, state,
			                      registered_at, last_heartbeat_at)
			SELECT gen_random_uuid(), $1, 2, k.id, $2, '{shell}', 'offline',
			       now() - make_interval(days => $3 + 1), now() - make_interval(days => $3)
			FROM k RETURNING id, api_key_id`, name, registrar, daysAgo).Scan(&id, &token))
		return id, token
	}
	gone, goneToken := agent("gone", 40)
	recent, _ := agent("recent", 1)

	env.eventually(int64(0), 10*time.Second, `SELECT count(*) FROM ax.agent WHERE id = $1`, gone)
	env.eventually(int64(0), time.Second, `SELECT count(*) FROM ax.api_key WHERE id = $1`, goneToken)
	env.eventually(int64(1), time.Second, `SELECT count(*) FROM ax.agent WHERE id = $1`, recent)
}
