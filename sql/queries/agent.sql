-- AgentInsert registers an agent. An agent of the same identity (the key
-- it registered with and its name) that an operator drained or that was
-- quarantined passes that on: the new registration starts draining or
-- quarantined, so deregistering and registering again lifts neither.
-- name: AgentInsert :one
WITH prior AS (
    SELECT p.drained_at, p.quarantined_at
    FROM ax.agent p
    WHERE p.registered_by = @registered_by AND p.name = @name
    ORDER BY p.registered_at DESC
    LIMIT 1
)
INSERT INTO ax.agent (id, name, labels, capacity, weight, version, api_key_id, registered_by, executors, label_bound,
                      host_name, host_ip, ready, state, drained_at, quarantined_at, last_probe_at)
SELECT @id, @name, @labels, @capacity, @weight, @version, @api_key_id, @registered_by,
       @executors::text[], @label_bound, sqlc.arg('host_name')::text, nullif(sqlc.arg('host_ip')::text, '')::inet, false,
       (CASE WHEN prior.drained_at IS NOT NULL THEN 'draining'
             WHEN prior.quarantined_at IS NOT NULL THEN 'quarantined'
             ELSE 'active' END)::ax.agent_state,
       prior.drained_at, prior.quarantined_at,
       CASE WHEN prior.quarantined_at IS NOT NULL THEN now() END
FROM (SELECT 1) one
LEFT JOIN prior ON true
RETURNING *;

-- name: AgentGetByID :one
SELECT * FROM ax.agent WHERE id = @id;

-- AgentGetMany returns the agents of @ids that exist (the lease broker
-- reads the agents of calls that arrive together in one statement).
-- name: AgentGetMany :many
SELECT * FROM ax.agent WHERE id = ANY(@ids::uuid[]);

-- AgentHeartbeat records an agent's load and that it is alive; an agent
-- marked offline comes back as active, or as draining or quarantined when
-- an operator's drain or a quarantine holds (see AgentInsert), unless it
-- holds a token minted at registration (it registers again). Its
-- smoothed load moves toward this heartbeat's sample (the busiest of
-- running/capacity, CPU and memory use) by 1 - e^(-elapsed/smoothing_seconds):
-- an exponential moving average whose weights do not depend on how often
-- the agent heartbeats, so a sample counts for about smoothing_seconds.
-- name: AgentHeartbeat :one
UPDATE ax.agent a
SET last_heartbeat_at = coalesce(sqlc.narg('now')::timestamptz, now()), running = sqlc.arg('running')::integer, cpu = sqlc.arg('cpu'), load1 = sqlc.arg('load1'), memory = sqlc.arg('memory'),
    disk_free_bytes = sqlc.narg('disk_free_bytes')::bigint,
    load = CASE WHEN a.load_at IS NULL THEN greatest(sqlc.arg('running')::integer::float8 / a.capacity, sqlc.arg('cpu')::float8, sqlc.arg('memory')::float8)
                ELSE a.load + (greatest(sqlc.arg('running')::integer::float8 / a.capacity, sqlc.arg('cpu')::float8, sqlc.arg('memory')::float8) - a.load)
                     * (1 - exp(-greatest(extract(epoch FROM coalesce(sqlc.narg('now')::timestamptz, now()) - a.load_at), 0)
                                / sqlc.arg('smoothing_seconds')::double precision))
           END,
    load_at = coalesce(sqlc.narg('now')::timestamptz, now()),
    ready = coalesce(sqlc.narg('ready')::boolean, ready),
    state = CASE WHEN state <> 'offline' THEN state
                 -- A heartbeat that passed a replica's key cache just
                 -- before the key was revoked does not bring it back. Nor
                 -- does one whose statement began before the agent went
                 -- offline and waited on its row: that snapshot shows the
                 -- token unrevoked (Postgres re-reads only the updated
                 -- row), but a token minted at registration (minted_by,
                 -- which never changes) is revoked in the transaction
                 -- that marks its agent offline (migration 00043).
                 WHEN EXISTS (SELECT 1 FROM ax.api_key k WHERE k.id = a.api_key_id
                                AND (k.revoked_at IS NOT NULL OR k.minted_by IS NOT NULL))
                      THEN state
                 WHEN drained_at IS NOT NULL THEN 'draining'
                 WHEN quarantined_at IS NOT NULL THEN 'quarantined'
                 ELSE 'active' END
WHERE a.id = @id
RETURNING a.state;

-- AgentSetState drains, reactivates or quarantines an agent, or marks it
-- offline; a reactivated agent starts a fresh health window. Going
-- offline or draining keeps a quarantine (its quarantined_at).
-- name: AgentSetState :exec
UPDATE ax.agent
SET state = @state::ax.agent_state,
    quarantined_at = CASE WHEN @state = 'quarantined' THEN coalesce(quarantined_at, now())
                          WHEN @state IN ('offline', 'draining') THEN quarantined_at END,
    health_since = CASE WHEN @state = 'active' AND state <> 'active' THEN now() ELSE health_since END
WHERE id = @id;

-- AgentPagePresent returns a page of the agents not offline whose state
-- is one of @states, in (name, id) order after (@after_name, @after_id).
-- They are read through agent_present_idx (its predicate is this one's)
-- and sorted: as many rows as the fleet, never the offline ones, which
-- are most of the table.
-- name: AgentPagePresent :many
SELECT a.id FROM ax.agent a
WHERE a.state IN ('active', 'draining', 'quarantined')
  AND a.state::text = ANY(@states::text[])
  AND (a.name, a.id) > (@after_name::text, @after_id::uuid)
ORDER BY a.name, a.id
LIMIT @max;

-- AgentPageOffline returns a page of the offline agents in (name, id)
-- order after (@after_name, @after_id), read in that order from
-- agent_offline_idx: a page costs the same however many there are.
-- name: AgentPageOffline :many
SELECT a.id FROM ax.agent a
WHERE a.state = 'offline'
  AND (a.name, a.id) > (@after_name::text, @after_id::uuid)
ORDER BY a.name, a.id
LIMIT @max;

-- AgentPageByIDs returns a page of the agents of @ids whose state is one
-- of @states, in (name, id) order after (@after_name, @after_id), read
-- by key.
-- name: AgentPageByIDs :many
SELECT a.id FROM ax.agent a
WHERE a.id = ANY(@ids::uuid[])
  AND a.state::text = ANY(@states::text[])
  AND (a.name, a.id) > (@after_name::text, @after_id::uuid)
ORDER BY a.name, a.id
LIMIT @max;

-- AgentList returns the agents of @ids (a page), in (name, id) order,
-- with what each runs now and its record over the last @window_seconds
-- (from its tasks' rows and events): outcomes, average duration of
-- successes, tasks routed to it and tasks it took. The record counts each
-- agent's newest @sample outcomes and @sample leases in the window at
-- most, read newest first through indexes (ax.agent_outcomes,
-- ax.agent_leases): a call costs the same at any rate (a busy agent ends
-- millions of tasks in ten minutes).
-- name: AgentList :many
SELECT a.*,
       (SELECT count(*) FROM ax.task t WHERE t.agent_id = a.id AND t.state IN ('leased', 'running'))::integer AS leased,
       coalesce(s.succeeded, 0)::bigint AS recent_succeeded,
       coalesce(s.failed, 0)::bigint AS recent_failed,
       coalesce(l.leases, 0)::bigint AS recent_leases,
       coalesce(l.routed_here, 0)::bigint AS recent_routed,
       coalesce(d.avg_seconds, 0)::double precision AS recent_avg_seconds
FROM ax.agent a
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE o.state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE o.state IN ('failed', 'timed_out')) AS failed
    FROM ax.agent_outcomes(a.id, now() - make_interval(secs => sqlc.arg('window_seconds')::double precision),
                           '{succeeded,failed,timed_out}', sqlc.arg('sample')::integer) o
) s ON true
LEFT JOIN LATERAL (
    SELECT count(*) AS leases, count(*) FILTER (WHERE l.routed) AS routed_here
    FROM ax.agent_leases(a.id, now() - make_interval(secs => sqlc.arg('window_seconds')::double precision),
                         sqlc.arg('sample')::integer) l
) l ON true
LEFT JOIN LATERAL (
    SELECT avg(o.duration_ms) / 1000.0 AS avg_seconds
    FROM ax.agent_outcomes(a.id, '-infinity', '{succeeded}', 50) o
    WHERE o.duration_ms IS NOT NULL
) d ON true
WHERE a.id = ANY(@ids::uuid[])
ORDER BY a.name, a.id;

-- AgentListCandidates returns the agents routing may prefer: active or
-- quarantined (unhealthy), heard from within @live_seconds, with their
-- labels, executors, load, weight and average task duration: the mean of
-- their last @duration_sample successes within @duration_window_seconds
-- (read newest first through indexes by ax.agent_outcomes, so the cost
-- per agent is bounded however busy the window was), each from lease to
-- result (duration_ms; started_at waits for the first heartbeat, so it
-- would miss up to an interval of every task, all of a short one).
-- name: AgentListCandidates :many
SELECT a.id, a.labels, a.executors, a.label_bound, a.capacity, a.weight, a.state, a.ready, a.running, a.load,
       (SELECT count(*) FROM ax.task t WHERE t.agent_id = a.id AND t.state IN ('leased', 'running'))::integer AS leased,
       coalesce((SELECT avg(r.duration_ms) / 1000.0
                 FROM ax.agent_outcomes(a.id, coalesce(sqlc.narg('now')::timestamptz, now())
                                              - make_interval(secs => sqlc.arg('duration_window_seconds')::double precision),
                                        '{succeeded}', sqlc.arg('duration_sample')::integer) r), 0)::double precision AS avg_seconds
FROM ax.agent a
WHERE a.state IN ('active', 'quarantined')
  AND a.last_heartbeat_at > coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('live_seconds')::double precision);

-- AgentQuarantineFailing quarantines active agents whose newest
-- @sample outcomes since the start of their health window (at most
-- @window_seconds back) number at least @min_results and either fail at
-- @failure_rate or more, or fail with a matching error at @error_share or
-- more (0: off). A failure matches when @error_codes is empty (any
-- failure) or its event's error code (as the attempt reported it, or the
-- reaper's) is one of them. The outcomes are read newest first through
-- indexes (ax.agent_outcomes), at most @sample per agent: the check runs
-- every reaper sweep, and counting a busy agent's whole window would read
-- every task it ended in it (millions at full speed).
-- name: AgentQuarantineFailing :many
UPDATE ax.agent a
SET state = 'quarantined', quarantined_at = now(), last_probe_at = now()
FROM (
    SELECT a2.id AS agent_id,
           count(*) AS n,
           count(*) FILTER (WHERE e.state IN ('failed', 'timed_out')) AS failed,
           count(*) FILTER (WHERE e.state IN ('failed', 'timed_out')
                              AND (cardinality(sqlc.arg('error_codes')::text[]) = 0
                                   OR e.error_code = ANY(sqlc.arg('error_codes')::text[]))) AS matching
    FROM ax.agent a2
    CROSS JOIN LATERAL ax.agent_outcomes(
        a2.id, greatest(a2.health_since, now() - make_interval(secs => sqlc.arg('window_seconds')::double precision)),
        '{succeeded,failed,timed_out}', sqlc.arg('sample')::integer) e
    WHERE a2.state = 'active'
    GROUP BY a2.id
) s
WHERE a.id = s.agent_id AND a.state = 'active'
  AND s.n >= sqlc.arg('min_results')::integer
  AND (s.failed::double precision / s.n >= sqlc.arg('failure_rate')::double precision
       OR (sqlc.arg('error_share')::double precision > 0
           AND s.matching::double precision / s.n >= sqlc.arg('error_share')::double precision))
RETURNING a.id, s.n::integer AS results, s.failed::integer AS failures, s.matching::integer AS matching;

-- AgentRestoreRecovered reactivates quarantined agents whose last
-- @successes probe outcomes since quarantine all succeeded.
-- name: AgentRestoreRecovered :many
UPDATE ax.agent a
SET state = 'active', quarantined_at = NULL, health_since = now()
WHERE a.state = 'quarantined'
  AND (SELECT count(*) FILTER (WHERE r.state = 'succeeded') = sqlc.arg('successes')::integer
       FROM ax.agent_outcomes(a.id, a.quarantined_at, '{succeeded,failed,timed_out}',
                              sqlc.arg('successes')::integer) r)
RETURNING a.id;

-- AgentTakeProbe lets a quarantined agent take one probe task when its
-- last probe was at least @every_seconds ago.
-- name: AgentTakeProbe :one
UPDATE ax.agent SET last_probe_at = now()
WHERE id = @id AND state = 'quarantined'
  AND (last_probe_at IS NULL OR last_probe_at <= now() - make_interval(secs => sqlc.arg('every_seconds')::double precision))
RETURNING id;

-- AgentMarkOffline turns agents silent for longer than @silent_seconds
-- offline and returns them; a quarantine holds when they come back.
-- name: AgentMarkOffline :many
UPDATE ax.agent SET state = 'offline'
WHERE state IN ('active', 'draining', 'quarantined')
  AND last_heartbeat_at < coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('silent_seconds')::double precision)
RETURNING id;

-- AgentDrainHold drains an agent on an operator's word: unlike the drain
-- an agent announces itself, it holds across deregistration, going
-- offline and registering again, until AgentResume.
-- name: AgentDrainHold :execrows
UPDATE ax.agent
SET state = CASE WHEN state = 'offline' THEN state ELSE 'draining' END,
    drained_at = coalesce(drained_at, now())
WHERE id = @id;

-- AgentResume lifts an operator's drain and a quarantine: the agent is
-- active again (when it is not offline) with a fresh health window.
-- name: AgentResume :execrows
UPDATE ax.agent
SET state = CASE WHEN state = 'offline' THEN state ELSE 'active' END,
    drained_at = NULL, quarantined_at = NULL, health_since = now()
WHERE id = @id;

-- AgentCountByState counts agents by state, readiness and pool label:
-- those not offline, and those offline heard from in the last day.
-- A metrics query: every replica reads the same shared rows, so all
-- replicas report the same numbers. Each part is read through an index
-- of its own (agent_present_idx, agent_offline_recent_idx): as one OR,
-- every scrape of every replica read the whole table, offline agents of
-- years included (they are never deleted).
-- name: AgentCountByState :many
SELECT a.state::text AS state, a.ready, coalesce(a.labels ->> 'pool', '')::text AS pool, count(*)::bigint AS agents
FROM (SELECT p.state, p.ready, p.labels FROM ax.agent p WHERE p.state IN ('active', 'draining', 'quarantined')
      UNION ALL
      SELECT o.state, o.ready, o.labels FROM ax.agent o
      WHERE o.state = 'offline' AND o.last_heartbeat_at > now() - interval '1 day') a
GROUP BY 1, 2, 3;

-- AgentsLeasable returns which of @ids may lease now (active or
-- quarantined): a coalesced lease hands no task to an agent drained
-- while its poll waited (TaskLeaseTake would then leave it pending).
-- name: AgentsLeasable :many
SELECT a.id FROM ax.agent a
WHERE a.id = ANY(@ids::uuid[]) AND a.state IN ('active', 'quarantined');

-- AgentListGone returns which of @ids are gone: offline, or not an
-- agent at all. Each replica asks about the agents its metrics have
-- series of; the agents not offline are read by key or through
-- agent_present_idx (whose predicate this is), never the offline ones.
-- name: AgentListGone :many
SELECT u.id::uuid FROM unnest(@ids::uuid[]) AS u(id)
WHERE NOT EXISTS (SELECT 1 FROM ax.agent a
                  WHERE a.id = u.id AND a.state IN ('active', 'draining', 'quarantined'));

-- AgentPruneGone deletes up to @max agents gone offline before the
-- history horizon (ax.history_horizon, migration 00091: what they leased
-- ended before it, so its runs are gone from history, but for a run whose
-- other shards ran long after; that one shows the agent's id, not its
-- name, and a re-run of its broadcast shard fails as for an offline
-- agent, TaskFailPinnedOfOffline), with the token
-- minted at their registration. Every registration is a new agent and a
-- new token (a restart, a pod rescheduled), so without this both tables
-- grew by a row per agent start for as long as ax ran, and GET /v1/keys
-- lists every key. Kept, whatever their age: an agent with a task leased
-- or running (the reaper reads its row to call a lease lost), or with
-- pinned tasks pending (the sweep fails those first); and the last row
-- of an identity (its key and
-- name) that an operator drained or that was quarantined, which a new
-- registration takes on (AgentInsert). Read oldest first through
-- agent_offline_recent_idx. Returns how many agents it deleted.
-- name: AgentPruneGone :one
WITH gone AS MATERIALIZED (
    SELECT a.id, a.api_key_id
    FROM ax.agent a
    WHERE a.state = 'offline' AND a.last_heartbeat_at < ax.history_horizon(now())
      AND NOT EXISTS (SELECT 1 FROM ax.task t
                      WHERE t.agent_id = a.id AND t.state IN ('leased', 'running'))
      AND NOT EXISTS (SELECT 1 FROM ax.task t
                      WHERE t.preferred_agent_id = a.id AND t.pinned AND t.state = 'pending')
      -- Older rows of an identity go first: a newer one is what
      -- AgentInsert reads; the last one goes only when it carries no
      -- drain or quarantine. (Equality, not IS NOT DISTINCT FROM, which
      -- agent_identity_idx cannot serve: an agent registered by no key
      -- is no identity's, AgentInsert reads none for it.)
      AND (a.registered_by IS NULL
           OR EXISTS (SELECT 1 FROM ax.agent n
                      WHERE n.registered_by = a.registered_by AND n.name = a.name
                        AND n.registered_at > a.registered_at)
           OR (a.drained_at IS NULL AND a.quarantined_at IS NULL
               AND NOT EXISTS (SELECT 1 FROM ax.agent o
                               WHERE o.registered_by = a.registered_by AND o.name = a.name AND o.id <> a.id)))
    ORDER BY a.last_heartbeat_at
    LIMIT sqlc.arg('max')::integer
    FOR UPDATE OF a SKIP LOCKED
), tokens AS (
    -- The agent's own token (minted at registration, used by no other
    -- agent); deleting it deletes the agent too (ON DELETE CASCADE), as
    -- does the delete below. Both by key from an array (= ANY): a join
    -- with gone was planned as a hash of the whole table.
    DELETE FROM ax.api_key k
    WHERE k.id = ANY(ARRAY(SELECT g.api_key_id FROM gone g)) AND k.minted_by IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM ax.agent o
                      WHERE o.api_key_id = k.id AND NOT (o.id = ANY(ARRAY(SELECT g.id FROM gone g))))
    RETURNING k.id
), agents AS (
    DELETE FROM ax.agent a
    WHERE a.id = ANY(ARRAY(SELECT g.id FROM gone g))
    RETURNING a.id
)
SELECT count(*)::integer AS deleted FROM agents WHERE (SELECT count(*) FROM tokens) >= 0;
