-- TaskLeasePick chooses and locks pending tasks for a set of agents
-- (@agent_ids, each wanting up to @maxes, @max in all) that share their
-- labels, executor kinds and label binding; TaskLeaseTake then leases
-- them in the same transaction. One statement serves every agent whose
-- long poll is due at once (the lease broker coalesces them), so 200
-- agents cost one pick, not 200. It returns candidates in this order,
-- and the caller hands each to an agent that may take it (preferred_agent_id,
-- fallback_agent_id and steal say who, see below), in order:
-- tasks that have waited longer than @starve_seconds (oldest first: low
-- priority is delayed, never starved); then tasks routed to one of the
-- agents (up to that agent's own max); then unassigned ones; then tasks
-- preferred by other agents that have waited longer than the steal delay
-- (a keyed task's runner-up first, anyone after @steal_any_seconds).
-- Pinned (broadcast) tasks are never stolen. Within a group: highest
-- priority, then oldest. The job's target labels must be a subset of the
-- agents', and its executor kind one they accept (@executors): a task of
-- another kind waits for an agent that accepts it (ax.tasks_without_agent
-- says so), whatever routing preferred. Agents registered with a key
-- bound to labels (@label_bound) take no untargeted job: they serve their
-- pools only. Each group reads the job by primary key per candidate, in
-- index order, until it has enough: no scan of the backlog. Tasks no live
-- agent could take when they were written (no_agent, migration 00076)
-- are not in the indexes read here: every lease read them and dropped
-- them on their job's labels, oldest first in the starved group. Nor are
-- the tasks of pools these agents cannot take (pools): a busy pool's
-- backlog was read the same way by every other pool's lease;
-- nor tasks held below their class's floor (floor_held, migration 00086):
-- every lease given the class's tokens read past them in each group.
--
-- @taken are tasks an earlier pick of the same transaction holds: its
-- locks do not make this one skip them.
--
-- Locks: where more than one of the agents' pools has tasks of a group,
-- each pool's share of the group's window (the first max, for
-- unassigned the room own leaves) is counted first, without locks
-- (starved_shares, unassigned_shares, stealable_shares:
-- ax.lease_pool_shares, which repeats this statement's rules), and each
-- pool's locking read takes its share, not the whole window. Before,
-- each pool locked up to max. Groups still overlap (a starved task is
-- unassigned too), so a lease can lock more than it takes, but not P
-- times. A pick that comes short under shares says so (the nil id), and
-- the caller picks again without them (@no_shares). (keyed_scan still
-- locks up to @max a pool: its fairness between keys is decided after
-- the read.)
--
-- Concurrency keys: tasks with a key are read apart (keyed_scan, keyed:
-- their own partial index, so jobs without keys read nothing more). Only
-- the tasks their keys have places for are in that index (the others are
-- parked, migration 00063), so none is stepped over; keys take turns
-- (see keyed). The limit is not checked here: TaskLeaseTake holds it
-- across replicas, under the keys' locks (see @lock_keys).
--
-- steal: 0, only the preferred agent (or anyone when there is none) may
-- take the task; 1, its runner-up (fallback_agent_id) too; 2, anyone.
--
-- Rate classes: a class's tasks are candidates only when the call was
-- granted tokens of that class (@classes, @caps: taken beforehand by
-- RateClassTake in its own short statement, so the hot bucket row is
-- locked for microseconds, not for the lease) and their priority is at
-- or above the class's floor (manual, or automatic while degraded); at
-- most @caps of a class's tasks are returned.
--
-- @lock_keys: the keys of the keyed tasks returned are locked (the
-- advisory locks of TaskConcurrencyLock, in hash order, after the pick)
-- for TaskLeaseTake to count them under; false when the caller picks
-- more than once in its transaction and locks them all in one pass.
--
-- Picking and leasing are separate statements so that the second reads
-- tasks and runs from bound arrays (= ANY of a constant, hashed: linear
-- whatever the plan). Joined in one statement, after an ANALYZE that ran
-- while a large fire was uncommitted (tables of many pages and "0 rows"),
-- the planner rescanned whole tables per row: a 15 ms lease took 1.7 s
-- until the next ANALYZE (TestLeaseAndCompleteStayLinearOnStaleStatistics).
-- name: TaskLeasePick :many
WITH pools AS MATERIALIZED (
    -- The pools these agents may take from (migration 00079): the
    -- untargeted pool unless they are label-bound, and the pools whose
    -- labels are a subset of theirs (one probe of the labels' GIN index
    -- per agent label); of those, the pools of no rate class and of the
    -- classes this call was granted tokens of (00081). Every group but
    -- own (read by agent) reads each pool in index order apart: tasks of
    -- pools these agents cannot take, or of classes out of tokens, are
    -- never read.
    SELECT p.id FROM ax.lease_pools(@agent_labels::jsonb, @executors::text[], @label_bound::boolean, @classes::text[]) AS p(id)
), pool_heads AS MATERIALIZED (
    -- With more than one pool: each pool's first waiting task
    -- (task_pending_age_idx), to tell which pools may have tasks of a
    -- group (a head past the starve or steal delay; any head for the
    -- unassigned): a group's shares are counted only when more than one
    -- may. One index probe a pool.
    SELECT p.id, h.not_before
    FROM pools p
    CROSS JOIN LATERAL (SELECT t.not_before FROM ax.task t
                        WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned
                        ORDER BY t.not_before
                        LIMIT 1) h
    WHERE (SELECT count(*) FROM pools) > 1
), starved_shares AS MATERIALIZED (
    -- With more than one pool of starved tasks, each pool's share of the
    -- oldest max (ax.lease_pool_shares, migration 00090, which says why):
    -- its locking read in starved takes that many, not max. Nothing when
    -- one pool or none has starved tasks (most leases): then starved reads
    -- as before, and nothing twice. (So unassigned_shares, of the room
    -- own leaves, and stealable_shares.)
    SELECT s.share_pool, s.share
    FROM ax.lease_pool_shares('starved',
                                 ARRAY(SELECT h.id FROM pool_heads h
                                       WHERE h.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('starve_seconds')::double precision)),
                                 sqlc.arg('max')::integer,
                                 @agent_labels::jsonb, @executors::text[], @label_bound::boolean, @classes::text[],
                                 @agent_ids::uuid[], @taken::uuid[], '{}'::uuid[], coalesce(sqlc.narg('now')::timestamptz, now()),
                                 sqlc.arg('starve_seconds')::double precision, sqlc.arg('steal_seconds')::double precision,
                                 sqlc.arg('steal_any_seconds')::double precision) AS s(share_pool, share)
    WHERE NOT @no_shares::boolean
      AND (SELECT count(*) FROM pool_heads h
           WHERE h.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('starve_seconds')::double precision)) > 1
), starved AS (
    SELECT x.*
    FROM (SELECT s.*
    FROM pools p
    CROSS JOIN LATERAL (
        SELECT t.id, t.execution_id, t.rate_class, t.priority, t.created_at, t.not_before, t.pinned,
               t.preferred_agent_id, t.fallback_agent_id, 0 AS grp, 0::bigint AS fair,
               NULL::text AS concurrency_scope, NULL::text AS concurrency_key, 0 AS concurrency_limit, t.params_bytes
        FROM ax.task t
        JOIN ax.job j ON j.id = t.job_id
        -- (NOT key_parked: implied by the key's absence, but said for
        -- task_pending_age_idx, which leaves parked tasks out, 00084, as
        -- it leaves out pinned ones, read below, 00087.)
        WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.agentless AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned AND t.id <> ALL(@taken::uuid[])
          AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('starve_seconds')::double precision)
          AND j.target_labels <@ @agent_labels::jsonb
          AND j.executor_kind::text = ANY(@executors::text[])
          AND (NOT @label_bound::boolean OR j.target_labels <> '{}'::jsonb)
          AND (t.preferred_agent_id IS NULL OR t.preferred_agent_id = ANY(@agent_ids::uuid[])
               OR (NOT t.pinned
                   AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_seconds')::double precision)
                   AND (t.fallback_agent_id IS NULL OR t.fallback_agent_id = ANY(@agent_ids::uuid[])
                        OR t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_any_seconds')::double precision))))
          AND (t.rate_class IS NULL OR (t.rate_class = ANY(@classes::text[]) AND NOT EXISTS (
              SELECT 1 FROM ax.rate_class c
              WHERE c.name = t.rate_class
                AND t.priority < coalesce(c.manual_min_priority,
                                          CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
        ORDER BY t.not_before
        LIMIT CASE WHEN (SELECT count(*) FROM starved_shares) > 0
                   THEN coalesce((SELECT h.share FROM starved_shares h WHERE h.share_pool = p.id), 0)
                   ELSE sqlc.arg('max')::integer END
        FOR UPDATE OF t SKIP LOCKED
    ) s
    UNION ALL
    -- Each agent's starved pinned tasks (a broadcast run's share), by
    -- agent: in the pools, every other agent's lease read them and
    -- dropped them (5,000 of a busy agent's: 10,002 rows a lease).
    SELECT s.*
    FROM (SELECT unnest(@agent_ids::uuid[]) AS id, unnest(@maxes::integer[]) AS max) a
    CROSS JOIN LATERAL (
        SELECT t.id, t.execution_id, t.rate_class, t.priority, t.created_at, t.not_before, t.pinned,
               t.preferred_agent_id, t.fallback_agent_id, 0 AS grp, 0::bigint AS fair,
               NULL::text AS concurrency_scope, NULL::text AS concurrency_key, 0 AS concurrency_limit, t.params_bytes
        FROM ax.task t
        JOIN ax.job j ON j.id = t.job_id
        WHERE t.pinned AND t.state = 'pending' AND t.preferred_agent_id = a.id
          AND NOT t.agentless AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held
          AND t.id <> ALL(@taken::uuid[])
          AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('starve_seconds')::double precision)
          AND j.executor_kind::text = ANY(@executors::text[])
          AND (NOT @label_bound::boolean OR j.target_labels <> '{}'::jsonb)
          AND (t.rate_class IS NULL OR (t.rate_class = ANY(@classes::text[]) AND NOT EXISTS (
              SELECT 1 FROM ax.rate_class c
              WHERE c.name = t.rate_class
                AND t.priority < coalesce(c.manual_min_priority,
                                          CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
        ORDER BY t.not_before
        LIMIT a.max
        FOR UPDATE OF t SKIP LOCKED
    ) s) x
    ORDER BY x.not_before
    LIMIT sqlc.arg('max')::integer
), own AS (
    -- Each agent's routed tasks, up to its own max.
    SELECT o.*
    FROM (SELECT unnest(@agent_ids::uuid[]) AS id, unnest(@maxes::integer[]) AS max) a
    CROSS JOIN LATERAL (
        SELECT t.id, t.execution_id, t.rate_class, t.priority, t.created_at, t.not_before, t.pinned,
               t.preferred_agent_id, t.fallback_agent_id, 1 AS grp, 0::bigint AS fair,
               NULL::text AS concurrency_scope, NULL::text AS concurrency_key, 0 AS concurrency_limit, t.params_bytes
        FROM ax.task t
        JOIN ax.job j ON j.id = t.job_id
        WHERE t.state = 'pending' AND t.preferred_agent_id = a.id AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.floor_held AND t.id <> ALL(@taken::uuid[]) AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) AND NOT t.agentless
          AND j.executor_kind::text = ANY(@executors::text[])
          AND (NOT @label_bound::boolean OR j.target_labels <> '{}'::jsonb)
          AND (t.rate_class IS NULL OR (t.rate_class = ANY(@classes::text[]) AND NOT EXISTS (
              SELECT 1 FROM ax.rate_class c
              WHERE c.name = t.rate_class
                AND t.priority < coalesce(c.manual_min_priority,
                                          CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
        ORDER BY t.priority DESC, t.created_at
        LIMIT a.max
        FOR UPDATE OF t SKIP LOCKED) o
), unassigned_shares AS MATERIALIZED (
    SELECT s.share_pool, s.share
    FROM ax.lease_pool_shares('unassigned',
                                 ARRAY(SELECT h.id FROM pool_heads h
                                       WHERE h.not_before IS NOT NULL),
                                 greatest(0, sqlc.arg('max')::integer - (SELECT count(*) FROM own))::integer,
                                 @agent_labels::jsonb, @executors::text[], @label_bound::boolean, @classes::text[],
                                 @agent_ids::uuid[], @taken::uuid[], '{}'::uuid[], coalesce(sqlc.narg('now')::timestamptz, now()),
                                 sqlc.arg('starve_seconds')::double precision, sqlc.arg('steal_seconds')::double precision,
                                 sqlc.arg('steal_any_seconds')::double precision) AS s(share_pool, share)
    WHERE NOT @no_shares::boolean
      AND (SELECT count(*) FROM pool_heads h
           WHERE h.not_before IS NOT NULL) > 1
      AND (SELECT count(*) FROM own) < sqlc.arg('max')::integer
), unassigned AS (
    -- Read only when the agents' own tasks leave room, and no more than
    -- that room (own's tasks are routed, never unassigned).
    SELECT x.*
    FROM pools p
    CROSS JOIN LATERAL (
        SELECT t.id, t.execution_id, t.rate_class, t.priority, t.created_at, t.not_before, t.pinned,
               t.preferred_agent_id, t.fallback_agent_id, 2 AS grp, 0::bigint AS fair,
               NULL::text AS concurrency_scope, NULL::text AS concurrency_key, 0 AS concurrency_limit, t.params_bytes
        FROM ax.task t
        JOIN ax.job j ON j.id = t.job_id
        WHERE t.pool_id = p.id AND t.state = 'pending' AND t.preferred_agent_id IS NULL AND NOT t.agentless AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.floor_held AND t.id <> ALL(@taken::uuid[]) AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now())
          AND (SELECT count(*) FROM own) < sqlc.arg('max')::integer
          AND j.target_labels <@ @agent_labels::jsonb
          AND j.executor_kind::text = ANY(@executors::text[])
          AND (NOT @label_bound::boolean OR j.target_labels <> '{}'::jsonb)
          AND (t.rate_class IS NULL OR (t.rate_class = ANY(@classes::text[]) AND NOT EXISTS (
              SELECT 1 FROM ax.rate_class c
              WHERE c.name = t.rate_class
                AND t.priority < coalesce(c.manual_min_priority,
                                          CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
        ORDER BY t.priority DESC, t.created_at
        LIMIT CASE WHEN (SELECT count(*) FROM unassigned_shares) > 0
                   THEN coalesce((SELECT s.share FROM unassigned_shares s WHERE s.share_pool = p.id), 0)
                   ELSE greatest(0, sqlc.arg('max')::integer - (SELECT count(*) FROM own)) END
        FOR UPDATE OF t SKIP LOCKED
    ) x
    ORDER BY x.priority DESC, x.created_at
    LIMIT sqlc.arg('max')::integer
), stealable_shares AS MATERIALIZED (
    SELECT s.share_pool, s.share
    FROM ax.lease_pool_shares('stealable',
                                 ARRAY(SELECT h.id FROM pool_heads h
                                       WHERE h.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_seconds')::double precision)),
                                 sqlc.arg('max')::integer,
                                 @agent_labels::jsonb, @executors::text[], @label_bound::boolean, @classes::text[],
                                 @agent_ids::uuid[], @taken::uuid[], ARRAY(SELECT o.id FROM own o), coalesce(sqlc.narg('now')::timestamptz, now()),
                                 sqlc.arg('starve_seconds')::double precision, sqlc.arg('steal_seconds')::double precision,
                                 sqlc.arg('steal_any_seconds')::double precision) AS s(share_pool, share)
    WHERE NOT @no_shares::boolean
      AND (SELECT count(*) FROM pool_heads h
           WHERE h.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_seconds')::double precision)) > 1
      AND (SELECT count(*) FROM own) + (SELECT count(*) FROM unassigned) < sqlc.arg('max')::integer
), stealable AS (
    -- Tasks routed elsewhere (or to one of these agents, past its own
    -- max: not those own took) that waited past the steal delay, oldest
    -- first; read only when own and unassigned tasks leave room. (The
    -- oldest max, not the room: within the group the highest priority
    -- goes first.)
    SELECT x.*
    FROM pools p
    CROSS JOIN LATERAL (
        SELECT t.id, t.execution_id, t.rate_class, t.priority, t.created_at, t.not_before, t.pinned,
               t.preferred_agent_id, t.fallback_agent_id, 3 AS grp, 0::bigint AS fair,
               NULL::text AS concurrency_scope, NULL::text AS concurrency_key, 0 AS concurrency_limit, t.params_bytes
        FROM ax.task t
        JOIN ax.job j ON j.id = t.job_id
        WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.pinned AND t.preferred_agent_id IS NOT NULL AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND t.id <> ALL(@taken::uuid[])
          AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_seconds')::double precision)
          AND (SELECT count(*) FROM own) + (SELECT count(*) FROM unassigned) < sqlc.arg('max')::integer
          AND t.id <> ALL(ARRAY(SELECT o.id FROM own o))
          AND (t.fallback_agent_id IS NULL OR t.fallback_agent_id = ANY(@agent_ids::uuid[])
               OR t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_any_seconds')::double precision))
          AND j.target_labels <@ @agent_labels::jsonb
          AND j.executor_kind::text = ANY(@executors::text[])
          AND (NOT @label_bound::boolean OR j.target_labels <> '{}'::jsonb)
          AND (t.rate_class IS NULL OR (t.rate_class = ANY(@classes::text[]) AND NOT EXISTS (
              SELECT 1 FROM ax.rate_class c
              WHERE c.name = t.rate_class
                AND t.priority < coalesce(c.manual_min_priority,
                                          CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
        ORDER BY t.not_before
        LIMIT CASE WHEN (SELECT count(*) FROM stealable_shares) > 0
                   THEN coalesce((SELECT h.share FROM stealable_shares h WHERE h.share_pool = p.id), 0)
                   ELSE sqlc.arg('max')::integer END
        FOR UPDATE OF t SKIP LOCKED
    ) x
    ORDER BY x.not_before
    LIMIT sqlc.arg('max')::integer
), keyed_scan AS (
    -- Keyed tasks (concurrency keys) apart, from their own index, which
    -- holds only those their keys have places for (the rest are parked).
    -- Whichever group a task would be in (routed here, unassigned, or
    -- stealable by the same rules as above), it is read here.
    SELECT x.*
    FROM pools p
    CROSS JOIN LATERAL (
        SELECT t.id, t.execution_id, t.rate_class, t.priority, t.created_at, t.not_before, t.pinned,
               t.preferred_agent_id, t.fallback_agent_id,
               CASE WHEN t.preferred_agent_id IS NULL THEN 2
                    WHEN t.preferred_agent_id = ANY(@agent_ids::uuid[]) THEN 1 ELSE 3 END AS grp,
               t.concurrency_scope, t.concurrency_key, t.concurrency_limit, t.params_bytes
        FROM ax.task t
        WHERE t.pool_id = p.id AND t.state = 'pending' AND t.concurrency_key IS NOT NULL AND NOT t.agentless AND NOT t.key_parked AND NOT t.no_agent AND NOT t.floor_held
          -- (A pick again without shares leaves keyed tasks to the next
          -- lease: the first pick read them, and locked their keys.)
          AND NOT @no_shares::boolean
          AND t.id <> ALL(@taken::uuid[])
          AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now())
          -- One CASE, not ANDed clauses, and the job read inside it, not
          -- joined: the planner guesses 1/2 for a CASE, where the product of
          -- the clauses' guesses (preference, rate class, key with room)
          -- came to ~1 row of thousands, and a join with ax.job made it hash
          -- and sort. Either way it read and sorted every pending keyed task;
          -- this walks the index in order and stops at the limit.
          AND CASE WHEN EXISTS (SELECT 1 FROM ax.job j
                                WHERE j.id = t.job_id
                                  AND (t.preferred_agent_id = ANY(@agent_ids::uuid[]) OR j.target_labels <@ @agent_labels::jsonb)
                                  AND j.executor_kind::text = ANY(@executors::text[])
                                  AND (NOT @label_bound::boolean OR j.target_labels <> '{}'::jsonb))
                        AND (t.preferred_agent_id IS NULL OR t.preferred_agent_id = ANY(@agent_ids::uuid[])
                             OR (NOT t.pinned
                                 AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_seconds')::double precision)
                                 AND (t.fallback_agent_id IS NULL OR t.fallback_agent_id = ANY(@agent_ids::uuid[])
                                      OR t.not_before <= coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_any_seconds')::double precision))))
                        AND (t.rate_class IS NULL OR (t.rate_class = ANY(@classes::text[]) AND NOT EXISTS (
                            SELECT 1 FROM ax.rate_class c
                            WHERE c.name = t.rate_class
                              AND t.priority < coalesce(c.manual_min_priority,
                                                        CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
                   THEN true ELSE false END
        -- Ready since (not_before: unparking sets it), not age: a key whose
        -- place freed goes behind the keys already waiting (migration 00064).
        ORDER BY t.priority DESC, t.not_before
        LIMIT sqlc.arg('max')::integer
        FOR UPDATE OF t SKIP LOCKED
    ) x
    ORDER BY x.priority DESC, x.not_before
    LIMIT sqlc.arg('max')::integer
), keyed AS (
    -- Fair between keys: a key has no more tasks unparked than places,
    -- and among those read, a key's 2nd comes after every other key's
    -- 1st. TaskLeaseTake checks the limit under the key's lock.
    SELECT s.id, s.execution_id, s.rate_class, s.priority, s.created_at, s.not_before, s.pinned,
           s.preferred_agent_id, s.fallback_agent_id, s.grp, s.nth AS fair,
           s.concurrency_scope, s.concurrency_key, s.concurrency_limit, s.params_bytes
    FROM (SELECT c.*,
                 row_number() OVER (PARTITION BY c.concurrency_scope, c.concurrency_key
                                    ORDER BY c.priority DESC, c.not_before) AS nth
          FROM keyed_scan c) s
    WHERE s.nth <= s.concurrency_limit
), candidates AS (
    -- A starved task can also be routed here or unassigned: keep it once.
    SELECT DISTINCT ON (id) *
    FROM (SELECT * FROM starved UNION ALL SELECT * FROM own UNION ALL SELECT * FROM unassigned
          UNION ALL SELECT * FROM stealable UNION ALL SELECT * FROM keyed) c
    ORDER BY id, grp
), firsts AS (
    SELECT *
    FROM candidates
    ORDER BY grp, fair, priority DESC, created_at
    LIMIT sqlc.arg('max')::integer
), picked AS (
    -- A class's tasks up to the tokens granted to this call.
    SELECT f.*
    FROM (SELECT *,
                 row_number() OVER (PARTITION BY rate_class ORDER BY grp, fair, priority DESC, created_at) AS rank
          FROM firsts) f
    LEFT JOIN (SELECT unnest(@classes::text[]) AS name, unnest(@caps::integer[]) AS cap) g
           ON g.name = f.rate_class
    WHERE f.rate_class IS NULL OR f.rank <= coalesce(g.cap, 0)
), key_locks AS (
    SELECT count(pg_advisory_xact_lock(sqlc.arg('lock_class')::integer, x.h))::integer AS n
    FROM (SELECT DISTINCT hashtext(k.concurrency_scope || chr(31) || k.concurrency_key) AS h
          FROM picked k
          WHERE @lock_keys::boolean AND k.concurrency_key IS NOT NULL
          ORDER BY h) x
), answer AS (
    SELECT p.id, p.execution_id, p.rate_class, p.priority, p.created_at, p.not_before, p.pinned,
           p.preferred_agent_id, p.fallback_agent_id, p.grp, p.fair, p.concurrency_scope, p.concurrency_key,
           p.concurrency_limit, p.params_bytes
    FROM picked p
    WHERE (SELECT n FROM key_locks) >= 0
    UNION ALL
    -- A sign, not a task (the nil id, first): a group read fewer tasks
    -- than its shares counted, and the pick came short of its room. A
    -- task another lease holds is counted in its pool's share, and the
    -- pool's locking read steps past it to the pool's next, but not to
    -- another pool: with a pool's share all held, the room it had is
    -- left. The caller picks again for what is left, without shares
    -- (@no_shares: each pool's read up to that room, as before shares;
    -- keyed tasks are left to the next lease). A pick that took all its
    -- shares counted is not short, however few they were.
    SELECT '00000000-0000-0000-0000-000000000000'::uuid, '00000000-0000-0000-0000-000000000000'::uuid, NULL::text,
           0, now(), now(), false, NULL::uuid, NULL::uuid, -1, 0::bigint, NULL::text, NULL::text, 0, NULL::integer
    WHERE NOT @no_shares::boolean
      AND ((SELECT coalesce(sum(h.share), 0) FROM starved_shares h) > (SELECT count(*) FROM starved)
           OR (SELECT coalesce(sum(h.share), 0) FROM unassigned_shares h) > (SELECT count(*) FROM unassigned)
           OR (SELECT coalesce(sum(h.share), 0) FROM stealable_shares h) > (SELECT count(*) FROM stealable))
      AND (SELECT count(*) FROM firsts) < sqlc.arg('max')::integer
)
SELECT id, execution_id, coalesce(rate_class, '')::text AS rate_class,
       preferred_agent_id, fallback_agent_id,
       coalesce(concurrency_scope, '')::text AS concurrency_scope, coalesce(concurrency_key, '')::text AS concurrency_key,
       concurrency_limit::integer AS concurrency_limit,
       -- Its share of the lease's answer (dispatch's params budget).
       coalesce(params_bytes, 0)::integer AS params_bytes,
       (CASE WHEN preferred_agent_id IS NULL THEN 2
             WHEN pinned OR not_before > coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_seconds')::double precision) THEN 0
             WHEN fallback_agent_id IS NOT NULL
                  AND not_before > coalesce(sqlc.narg('now')::timestamptz, now()) - make_interval(secs => sqlc.arg('steal_any_seconds')::double precision) THEN 1
             ELSE 2 END)::integer AS steal
FROM answer
ORDER BY grp, fair, priority DESC, created_at;

-- TaskLeaseTake leases the tasks TaskLeasePick locked (@task_ids, of runs
-- @execution_ids) to the agents the caller handed them to (@agent_ids,
-- one per task): each gets a fresh token and an expiry from the database
-- clock, an event, and its run starts. An agent drained or marked offline
-- while its poll waited gets nothing. A keyed task is leased only while
-- its key has room (the fence of concurrency keys): @key_nths[i] is its
-- place among the tasks of its key in @task_ids (0: no key), and the
-- key's leased and running tasks are counted by this statement, after
-- the keys' locks were taken (TaskLeasePick or TaskConcurrencyLock), so
-- from a snapshot with every lease of the key that committed before.
-- name: TaskLeaseTake :many
WITH leased AS (
    UPDATE ax.task t
    SET state = 'leased', agent_id = x.agent_id, lease_token = gen_random_uuid(),
        lease_expires_at = coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => sqlc.arg('lease_seconds')::double precision),
        -- A new attempt: its timeout counts from its own start.
        leased_at = coalesce(sqlc.narg('now')::timestamptz, now()), started_at = NULL, updated_at = now(),
        -- The lease's event is these columns (migration 00067): its id,
        -- from the events' sequence, places it among the run's logs, and
        -- the host is the agent's as it leased.
        lease_event_id = nextval('ax.task_event_id_seq'), worker_host = nullif(a.host_name, ''),
        worker_ip = a.host_ip
    -- (No state = 'pending' here: the rows are TaskLeasePick's, locked in
    -- this transaction, and saying so would invite a read of every
    -- pending task through the partial indexes.)
    -- Joined by primary key alone: with t.id = ANY(@task_ids) as well,
    -- each task's index probe read the whole array again (60 ms of a
    -- 479-task lease's 90).
    -- The agent is read here once for both uses: it must still be active
    -- or quarantined, and its host goes into the row (a probe of ax.agent
    -- per task cost 2 of the lease's 36 blocks a task).
    FROM (SELECT unnest(@task_ids::uuid[]) AS id, unnest(@agent_ids::uuid[]) AS agent_id,
                 unnest(@key_nths::integer[]) AS nth) x
    JOIN ax.agent a ON a.id = x.agent_id
    WHERE t.id = x.id AND a.state IN ('active', 'quarantined')
      AND (x.nth = 0
           OR x.nth + (SELECT count(*) FROM ax.task r
                       WHERE r.concurrency_scope = t.concurrency_scope AND r.concurrency_key = t.concurrency_key
                         AND r.concurrency_key IS NOT NULL AND r.state IN ('leased', 'running')) <= t.concurrency_limit)
    RETURNING t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.attempt,
              t.max_attempts, t.timeout_seconds, t.lease_token, t.lease_expires_at, t.agent_id,
              t.preferred_agent_id, t.not_before, t.rate_class, t.leased_at
), started AS (
    -- A run starts with its first lease: in place (a HOT update, see
    -- migration 00011). Only runs of tasks leased here (an agent drained
    -- after its batch began gets none, and its runs do not start), read
    -- by = ANY of an array made once: as a join, a generic plan took
    -- leased for one row and compared every run with every task.
    UPDATE ax.execution e
    SET state = 'running', started_at = coalesce(e.started_at, now()), updated_at = now()
    WHERE e.id = ANY(ARRAY(SELECT l.execution_id FROM leased l)) AND e.state = 'pending'
), runs AS MATERIALIZED (
    -- What agents need of the runs, read once from the bound array (before
    -- this statement's own update). Inlined, it became a probe per task
    -- that also walked the whole array: three fifths of the lease. Read
    -- through ax.leased_runs for its row estimate (migration 00034): as a
    -- read by = ANY, a generic plan took it for 10 rows and joined it with
    -- the leased tasks in a nested loop.
    SELECT r.id, r.params, r.scheduled_for, r.priority, r.traceparent
    FROM ax.leased_runs(@execution_ids::uuid[]) r
)
SELECT l.id, l.execution_id, l.job_id, l.shard_index, l.shard_total, l.shard_param, l.attempt,
       l.max_attempts, l.timeout_seconds, l.lease_token::uuid AS lease_token,
       l.lease_expires_at::timestamptz AS lease_expires_at,
       -- When the attempt times out at the earliest (the reaper counts
       -- from its first heartbeat): the deadline an HTTP task's request
       -- announces.
       (l.leased_at + make_interval(secs => l.timeout_seconds))::timestamptz AS deadline,
       (l.preferred_agent_id IS NULL OR l.preferred_agent_id = l.agent_id)::boolean AS routed_here,
       l.not_before::timestamptz AS ready_at, coalesce(l.rate_class, '')::text AS rate_class,
       extract(epoch FROM clock_timestamp() - l.not_before)::double precision AS waited_seconds,
       j.executor_kind, j.executor, j.name AS job_name, j.group_name,
       r.params, r.scheduled_for, r.priority, coalesce(r.traceparent, '')::text AS traceparent
FROM leased l
JOIN ax.job j ON j.id = l.job_id
JOIN runs r ON r.id = l.execution_id;

-- TaskConcurrencyLock takes the transaction's advisory locks of the
-- concurrency keys it is about to lease (@scopes[i], @keys[i]), in the
-- lock class @lock_class, one per key hash in hash order, so that two
-- leases never wait on each other crosswise (TaskLeasePick's and
-- ax.concurrency_unpark's are taken the same way). Held until the lease
-- commits: a lease of another replica for the same key waits, then
-- counts this one's tasks. Two keys of one hash share a lock.
-- name: TaskConcurrencyLock :exec
SELECT count(pg_advisory_xact_lock(@lock_class::integer, x.h))
FROM (SELECT DISTINCT hashtext(u.scope || chr(31) || u.key) AS h
      FROM (SELECT unnest(@scopes::text[]) AS scope, unnest(@keys::text[]) AS key) u
      ORDER BY h) x;

-- TaskConcurrencyUnpark unparks the waiting tasks of keys that freed a
-- place (ax.concurrency_unpark, migrations 00063 and 00064), in its own
-- transaction; @now is the lease's clock (nil: the database's).
-- name: TaskConcurrencyUnpark :one
SELECT ax.concurrency_unpark(@lock_class::integer, @max_keys::integer, sqlc.narg('now')::timestamptz)::integer AS unparked;

-- TaskConcurrencyWaiting counts, per concurrency scope (a group, or a
-- job shown as job:<group>/<name>), the keys at their limit that have
-- ready tasks waiting, and those tasks (a metrics query: both indexes of
-- keyed tasks, nothing of the others).
-- name: TaskConcurrencyWaiting :many
WITH running AS (
    SELECT concurrency_scope, concurrency_key, count(*) AS n
    FROM ax.task
    WHERE concurrency_key IS NOT NULL AND state IN ('leased', 'running')
    GROUP BY concurrency_scope, concurrency_key
), waiting AS (
    SELECT concurrency_scope, concurrency_key, count(*) AS n, min(concurrency_limit) AS lim
    FROM ax.task
    WHERE concurrency_key IS NOT NULL AND state = 'pending' AND NOT agentless AND not_before <= now()
    GROUP BY concurrency_scope, concurrency_key
)
SELECT (CASE WHEN w.concurrency_scope LIKE 'job:%'
             THEN 'job:' || coalesce((SELECT j.group_name || '/' || j.name FROM ax.job j
                                      WHERE j.id::text = substr(w.concurrency_scope, 5)), substr(w.concurrency_scope, 5))
             ELSE w.concurrency_scope END)::text AS scope,
       count(*)::bigint AS keys_at_limit, sum(w.n)::bigint AS waiting
FROM waiting w
JOIN running r ON r.concurrency_scope = w.concurrency_scope AND r.concurrency_key = w.concurrency_key
WHERE r.n >= w.lim
GROUP BY 1
ORDER BY 1;

-- TaskRenew extends the leases the agent still holds (matching token) and
-- marks them running; the ids it does not return are lost to the agent.
--
-- The statements that write several of an agent's tasks (this one,
-- TaskComplete, TaskRelease, TaskAwaitTarget) lock them in id order first
-- (the count(*) runs before the update): each locking in its own input's
-- order, a heartbeat and the results of the same tasks deadlocked, and
-- Postgres failed one of them after deadlock_timeout (1 s).
-- name: TaskRenew :many
WITH locked AS (
    SELECT t.id FROM ax.task t
    WHERE t.id = ANY(@task_ids::uuid[]) AND t.lease_token = ANY(@tokens::uuid[]) AND t.agent_id = @agent_id
    ORDER BY t.id
    FOR UPDATE
)
UPDATE ax.task t
SET lease_expires_at = coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => sqlc.arg('lease_seconds')::double precision),
    state = 'running', started_at = coalesce(t.started_at, sqlc.narg('now')::timestamptz, now()), updated_at = now()
FROM (SELECT unnest(@task_ids::uuid[]) AS id, unnest(@tokens::uuid[]) AS token) h
WHERE t.id = h.id AND t.lease_token = h.token AND t.agent_id = @agent_id
  AND t.state IN ('leased', 'running') AND (SELECT count(*) FROM locked) >= 0
RETURNING t.id, (t.cancel_requested_at IS NOT NULL)::boolean AS cancel,
          t.lease_expires_at::timestamptz AS lease_expires_at;

-- TaskComplete records results whose lease token is current: success and
-- cancellation end the task; a failure or timeout is retried (attempt + 1,
-- after exponential backoff from the job's settings) until attempts run
-- out, unless the run was cancelled meanwhile (cancel_requested_at): then
-- the reported outcome is final. The caller ends the runs in the same transaction: ExecutionEndSingle
-- for runs of one shard, ExecutionFinalize for runs of several, which sees
-- every other shard's committed state because its row is held here.
-- Results with a stale token, or reported by an agent (@agent_ids, one per result) that
-- does not hold the lease, match nothing and change nothing.
--
-- A result that ends a run of one shard (most results) is not written to
-- the task row: the row is locked and its outcome returned (ends_run), and
-- the caller passes it to ExecutionEndSingle, which writes the run and the
-- task to history with it. Updating the live row first cost a new row
-- version and index entries, deleted again by the next statement.
-- name: TaskComplete :many
WITH input AS (
    -- One result per task (a repeated id is one result, not two), read
    -- through ax.task_results for its row estimate (migration 00034): with
    -- the generic plans this runs with, an unnest here was taken for 10
    -- rows and joined with the tasks in a nested loop, every result with
    -- every task.
    SELECT r.id, r.token, r.state, r.result, r.error, r.error_code, r.agent_id
    FROM ax.agent_task_results(@task_ids::uuid[], @tokens::uuid[], @states::text[], @results::jsonb[],
                               @errors::text[], @error_codes::text[], @agent_ids::uuid[]) r
), locked AS (
    -- Lock the executions first, in id order: two results ending the last
    -- shards of one execution in parallel transactions would otherwise
    -- each see the other's shard unfinished, and neither would end it.
    -- A run of one shard has no sibling to race with and is not locked:
    -- most runs, and the lock cost a fifth of BenchmarkEndToEnd.
    -- (= ANY of an array: primary-key lookups whatever the statistics say;
    -- a join here was planned as scans of every task and execution.)
    SELECT e.id
    FROM ax.execution e
    WHERE e.id = ANY(ARRAY(SELECT t.execution_id FROM ax.task t
                           WHERE t.id = ANY(@task_ids::uuid[]) AND t.shard_total > 1))
    ORDER BY e.id
    FOR UPDATE
), tasks_locked AS (
    -- Then the tasks, in id order (see TaskRenew), before done writes any,
    -- with what the rest of the statement needs of them: read once here
    -- (locked, so current) rather than again by done and ending, which
    -- cost three blocks a task each time (BenchmarkWritePath's
    -- complete-blks-per-task). Only leased tasks; whether a result's
    -- token is the lease's is checked below, by a join: = ANY(@tokens)
    -- here read the tokens from the start for every task, quadratic in
    -- the batch (about 12 ms for 3,000 results).
    SELECT t.id, t.execution_id, t.shard_index, t.shard_total, t.attempt, t.max_attempts,
           t.cancel_requested_at, t.agent_id, t.leased_at, t.lease_token, t.lease_event_id,
           t.preferred_agent_id, t.worker_host, t.worker_ip
    FROM ax.task t
    WHERE t.id = ANY(@task_ids::uuid[]) AND t.lease_token IS NOT NULL
      AND (SELECT count(*) FROM locked) >= 0
    ORDER BY t.id
    FOR UPDATE
), checked AS (
    -- The results whose token is current and whose reporting agent holds
    -- the lease, not just knows its token (@agent_ids' nil UUID: ax's own
    -- results, not checked); retry says the task goes back to pending.
    SELECT l.id, l.execution_id, l.shard_index, l.shard_total, l.attempt, l.agent_id, l.leased_at,
           l.lease_event_id, l.preferred_agent_id, l.worker_host, l.worker_ip,
           i.state AS reported, i.result, nullif(i.error, '') AS error, nullif(i.error_code, '') AS error_code,
           (i.state IN ('failed', 'timed_out') AND l.attempt < l.max_attempts AND l.cancel_requested_at IS NULL
            -- a result Postgres cannot store fails the same way again
            AND i.error_code <> 'bad_result') AS retry
    FROM tasks_locked l
    JOIN input i ON i.id = l.id
    WHERE l.lease_token = i.token AND (i.agent_id IS NULL OR l.agent_id = i.agent_id)
), done AS (
    -- Results written to the task row: a retry, or a shard of a run of
    -- several. Only those rows are read again (by key, from an array made
    -- once); the others end their runs (ending, below).
    UPDATE ax.task t
    SET state = CASE WHEN c.retry THEN 'pending' ELSE c.reported::ax.task_state END,
        attempt = CASE WHEN c.retry THEN t.attempt + 1 ELSE t.attempt END,
        not_before = CASE WHEN c.retry
                          THEN coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => least(j.retry_backoff_max_seconds,
                                   j.retry_backoff_seconds * power(2, t.attempt - 1)))
                          ELSE t.not_before END,
        finished_at = CASE WHEN c.retry THEN NULL ELSE now() END,
        -- An adaptive job's retry after a timeout gets twice the timeout
        -- of the attempt before it, up to the job's ceiling.
        timeout_seconds = CASE WHEN c.retry AND c.reported = 'timed_out' AND j.timeout_mode = 'adaptive'
                               THEN least(j.timeout_seconds, t.timeout_seconds * 2)
                               ELSE t.timeout_seconds END,
        result = c.result, error = c.error, error_code = c.error_code,
        lease_token = NULL, lease_expires_at = NULL, updated_at = now(),
        -- A retry's lease is written down as its event (events, below):
        -- the row's columns take the next one. A success's event is
        -- end_event_id with finished_at (migration 00067).
        lease_event_id = CASE WHEN c.retry THEN NULL ELSE t.lease_event_id END,
        end_event_id = CASE WHEN NOT c.retry AND c.reported = 'succeeded' THEN nextval('ax.task_event_id_seq') END
    FROM checked c, ax.job j
    -- Joined by primary key alone (see TaskLeaseTake): the array holds
    -- the ids to write, each read once.
    WHERE t.id = ANY(ARRAY(SELECT w.id FROM checked w WHERE w.shard_total > 1 OR w.retry))
      AND t.id = c.id AND j.id = t.job_id
    RETURNING t.id, t.execution_id, t.shard_index, t.shard_total, t.attempt, t.state, t.agent_id, t.error,
              t.error_code, t.not_before, c.reported, t.timeout_seconds, j.timeout_mode, c.leased_at,
              c.lease_event_id, c.preferred_agent_id, c.worker_host, c.worker_ip
), ending AS (
    -- Results that end a run of one shard: the task, locked above, is not
    -- updated (see above).
    SELECT c.id, c.execution_id, c.shard_index, c.attempt, c.agent_id, c.leased_at,
           c.reported, c.result, c.error, c.error_code
    FROM checked c
    WHERE c.shard_total = 1 AND NOT c.retry
), events AS (
    -- For a retry, the attempt's lease (its columns, with their event's
    -- id); the attempt's own outcome unless a success (with the host that
    -- reported it; a success is the row's end_event_id), then (for a
    -- retry) the new pending attempt.
    INSERT INTO ax.task_event (id, task_id, execution_id, shard_index, attempt, kind, state, agent_id, message,
                               worker_host, worker_ip, error_code, duration_ms, at)
    SELECT d.lease_event_id, d.id, d.execution_id, d.shard_index, d.attempt - 1, 'state'::ax.task_event_kind,
           'leased'::ax.task_state, d.agent_id, ax.lease_message(d.preferred_agent_id, d.agent_id),
           d.worker_host, d.worker_ip, NULL::text, NULL::bigint, d.leased_at
    FROM done d
    WHERE d.state = 'pending' AND d.lease_event_id IS NOT NULL
    UNION ALL
    SELECT nextval('ax.task_event_id_seq'), d.id, d.execution_id, d.shard_index,
           CASE WHEN d.state = 'pending' THEN d.attempt - 1 ELSE d.attempt END,
           'state'::ax.task_event_kind, d.reported::ax.task_state, d.agent_id, coalesce(d.error, ''),
           nullif(w.host_name, ''), w.host_ip, d.error_code, NULL, clock_timestamp()
    FROM done d
    LEFT JOIN ax.agent w ON w.id = d.agent_id
    WHERE d.state <> 'succeeded'
    UNION ALL
    SELECT nextval('ax.task_event_id_seq'), n.id, n.execution_id, n.shard_index, n.attempt, 'state'::ax.task_event_kind,
           n.reported::ax.task_state, n.agent_id, coalesce(n.error, ''), nullif(w.host_name, ''), w.host_ip,
           n.error_code, NULL, clock_timestamp()
    FROM ending n
    LEFT JOIN ax.agent w ON w.id = n.agent_id
    WHERE n.reported <> 'succeeded'
    UNION ALL
    SELECT nextval('ax.task_event_id_seq'), id, execution_id, shard_index, attempt, 'state'::ax.task_event_kind,
           'pending'::ax.task_state, agent_id,
           'retry after backoff, not before ' || to_char(not_before AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
           || CASE WHEN reported = 'timed_out' AND timeout_mode = 'adaptive'
                   THEN ', with twice the timeout (at most timeout_seconds): ' || timeout_seconds || ' s' ELSE '' END,
           NULL, NULL, NULL, NULL, clock_timestamp()
    FROM done WHERE state = 'pending'
)
SELECT id, execution_id, state::text AS state, shard_total, coalesce(error_code, '')::text AS error_code,
       false AS ends_run, NULL::jsonb AS result, ''::text AS error
FROM done
UNION ALL
SELECT id, execution_id, reported, 1, coalesce(error_code, '')::text, true, result, coalesce(error, '')::text
FROM ending;

-- TaskRecordEnd writes the outcomes of results that TaskComplete found to
-- end their runs (ending) to the task rows, for runs ExecutionEndSingle
-- did not end (one ended beside its task, such as by a cancel that did
-- not wait: maintenance moves it once its task has ended).
-- name: TaskRecordEnd :exec
UPDATE ax.task t
SET state = f.state::ax.task_state, result = f.result, error = nullif(f.error, ''), error_code = nullif(f.error_code, ''),
    finished_at = now(), lease_token = NULL, lease_expires_at = NULL, updated_at = now(),
    end_event_id = CASE WHEN f.state = 'succeeded' THEN nextval('ax.task_event_id_seq') END
FROM (SELECT unnest(@task_ids::uuid[]) AS id, unnest(@states::text[]) AS state, unnest(@results::jsonb[]) AS result,
             unnest(@errors::text[]) AS error, unnest(@error_codes::text[]) AS error_code) f
WHERE t.id = ANY(@task_ids::uuid[]) AND t.id = f.id;

-- TaskRelease hands leases back: the tasks are pending again at once,
-- without using up an attempt (a draining agent did not fail them). Tasks
-- of cancelled runs are not released, so no other agent starts them: the
-- caller ends those as cancelled.
-- name: TaskRelease :many
WITH locked AS (
    -- In id order (see TaskRenew), with the lease as it is: written down
    -- as its event below (the row takes the next one).
    SELECT t.id, t.lease_event_id, t.leased_at, t.preferred_agent_id, t.worker_host, t.worker_ip
    FROM ax.task t
    WHERE t.id = ANY(@task_ids::uuid[]) AND t.lease_token = ANY(@tokens::uuid[]) AND t.agent_id = @agent_id
    ORDER BY t.id
    FOR UPDATE
), released AS (
    UPDATE ax.task t
    SET state = 'pending', lease_token = NULL, lease_expires_at = NULL, not_before = now(), updated_at = now(),
        lease_event_id = NULL
    FROM (SELECT unnest(@task_ids::uuid[]) AS id, unnest(@tokens::uuid[]) AS token) r
    WHERE t.id = r.id AND t.lease_token = r.token AND t.agent_id = @agent_id
      AND t.state IN ('leased', 'running') AND t.cancel_requested_at IS NULL
      AND (SELECT count(*) FROM locked) >= 0
    RETURNING t.id, t.execution_id, t.shard_index, t.attempt, t.agent_id
), events AS (
    INSERT INTO ax.task_event (id, task_id, execution_id, shard_index, attempt, kind, state, agent_id, message,
                               worker_host, worker_ip, at)
    SELECT k.lease_event_id, r.id, r.execution_id, r.shard_index, r.attempt, 'state'::ax.task_event_kind,
           'leased'::ax.task_state, r.agent_id,
           ax.lease_message(k.preferred_agent_id, r.agent_id), k.worker_host, k.worker_ip, k.leased_at
    FROM released r
    JOIN locked k ON k.id = r.id
    WHERE k.lease_event_id IS NOT NULL
    UNION ALL
    SELECT nextval('ax.task_event_id_seq'), r.id, r.execution_id, r.shard_index, r.attempt, 'state'::ax.task_event_kind,
           'pending'::ax.task_state, r.agent_id, 'released by its agent', nullif(w.host_name, ''), w.host_ip, clock_timestamp()
    FROM released r
    LEFT JOIN ax.agent w ON w.id = r.agent_id
)
SELECT id FROM released;

-- TaskLogAppend stores chunks of tasks whose lease is current and held by
-- agent @agent_id, in order,
-- until a task's output reaches @max_bytes (every attempt counted): the
-- chunk that crosses the cap is cut back to the start of a UTF-8
-- character (continuation bytes are 10xxxxxx), later ones are dropped,
-- and the append that crosses the cap records one event on stream 'ax'
-- saying so (@marker). The count lives on the task row and is advanced by
-- the same statement, so parallel appends of one task queue on the row
-- lock and each sees the bytes before it; the tasks are locked in id
-- order first (the count(*) below runs before the update), so two
-- batches never wait on each other crosswise. matched counts the tasks
-- whose lease the chunks named (a capped task matches and stores nothing),
-- stored the events written.
-- name: TaskLogAppend :one
WITH arg AS (
    SELECT @max_bytes::bigint AS cap, @marker::text AS marker
), c AS (
    SELECT u.id, u.token, u.stream, u.data, u.n, octet_length(u.data)::bigint AS len
    FROM ROWS FROM (unnest(@task_ids::uuid[]), unnest(@tokens::uuid[]), unnest(@streams::text[]), unnest(@data::text[]))
         WITH ORDINALITY AS u(id, token, stream, data, n)
), offered AS (
    SELECT id, token, sum(len)::bigint AS bytes, max(n) AS last_n, @agent_id::uuid AS agent_id FROM c GROUP BY id, token
), locked AS (
    SELECT t.id FROM ax.task t
    WHERE t.id = ANY(@task_ids::uuid[])
    ORDER BY t.id
    FOR UPDATE
), counted AS (
    UPDATE ax.task t SET log_bytes = t.log_bytes + o.bytes
    FROM offered o
    WHERE t.id = ANY(@task_ids::uuid[]) AND t.id = o.id AND t.lease_token = o.token
      -- The holder, compared with the input rows (see TaskComplete).
      AND t.agent_id = o.agent_id AND (SELECT count(*) FROM locked) >= 0
    RETURNING t.id, t.lease_token, t.execution_id, t.shard_index, t.attempt, t.agent_id,
              t.log_bytes - o.bytes AS before, o.bytes, o.last_n
), placed AS (
    SELECT k.id, k.execution_id, k.shard_index, k.attempt, k.agent_id, c.stream, c.data, c.len, c.n,
           k.before + sum(c.len) OVER (PARTITION BY c.id ORDER BY c.n) - c.len AS start
    FROM c JOIN counted k ON k.id = c.id AND k.lease_token = c.token
), inserted AS (
    INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, agent_id, stream, message)
    SELECT ev.id, ev.execution_id, ev.shard_index, ev.attempt, 'log', ev.agent_id, ev.stream, ev.message
    FROM (
        SELECT p.id, p.execution_id, p.shard_index, p.attempt, p.agent_id, p.stream, p.n, 0 AS after,
               CASE WHEN p.start + p.len <= arg.cap THEN p.data
                    ELSE (SELECT convert_from(substring(cut.x FROM 1 FOR
                                     CASE WHEN get_byte(cut.x, cut.b) & 192 <> 128 THEN cut.b
                                          WHEN get_byte(cut.x, cut.b - 1) & 192 <> 128 THEN cut.b - 1
                                          WHEN get_byte(cut.x, cut.b - 2) & 192 <> 128 THEN cut.b - 2
                                          ELSE cut.b - 3 END), 'UTF8')
                          FROM (SELECT convert_to(p.data, 'UTF8') AS x, (arg.cap - p.start)::integer AS b) cut)
               END AS message
        FROM placed p, arg
        WHERE p.start < arg.cap
        UNION ALL
        SELECT k.id, k.execution_id, k.shard_index, k.attempt, k.agent_id, 'ax', k.last_n, 1, arg.marker
        FROM counted k, arg
        WHERE k.before <= arg.cap AND k.before + k.bytes > arg.cap
        ORDER BY n, after
    ) ev
    RETURNING 1
)
SELECT (SELECT count(*) FROM counted)::int AS matched, (SELECT count(*) FROM inserted)::int AS stored;

-- TaskReapExpired ends leases that ran out and tasks past their timeout.
-- A lease lost with its agent (the agent offline, or silent for
-- @silent_seconds, a whole lease: killed, crashed or cut off) is no fault
-- of the task: it is pending again at once, on the same attempt, with
-- lost_leases + 1, and runs on another agent, until the
-- @max_lost_leases-th loss fails it with error 'lost: …' (a task that
-- kills its agents does not kill them all). A lease that ran out while its
-- agent still heartbeats (the agent dropped the task) is a failed attempt:
-- pending again after backoff with attempt + 1, or failed when its
-- attempts are spent. A task past its timeout is timed out the same way;
-- one of a cancelled run is cancelled. A task an agent holds is timed out
-- @timeout_grace_seconds after its timeout: its agent counts the timeout
-- from when it started the task (after the lease's round trip), then
-- stops it (SIGTERM, its kill grace, SIGKILL) and reports timed_out; the
-- reaper timing it out first would refuse that report and the dying
-- task's last logs, and retry the task while it still runs. Tasks no
-- agent holds (sent by ax serve, or awaiting an HTTP target's result)
-- get none. Returns each reaped task's
-- execution, new state, whether it had timed out (rather than lost its
-- lease) and whether its agent was lost.
-- name: TaskReapExpired :many
WITH expired AS (
    -- (With the lease as it is, read under the row's lock: a retry's or
    -- rerun's is written down as its event below.)
    SELECT t.id, k.timed_out, k.lost, t.lost_leases + k.lost::integer AS lost_leases,
           t.lease_event_id, t.leased_at, t.preferred_agent_id, t.worker_host, t.worker_ip,
           CASE WHEN k.lost THEN 'lease lost: agent offline or silent'
                WHEN NOT k.timed_out THEN 'lease expired'
                ELSE 'timed out after ' || t.timeout_seconds || ' s' END AS why,
           CASE WHEN t.cancel_requested_at IS NOT NULL THEN 'cancel'
                WHEN k.lost AND t.lost_leases + 1 < @max_lost_leases::integer THEN 'rerun'
                WHEN k.lost THEN 'lost'
                WHEN t.attempt < t.max_attempts THEN 'retry'
                ELSE 'end' END AS outcome
    FROM ax.task t
    LEFT JOIN ax.agent a ON a.id = t.agent_id
    CROSS JOIN LATERAL (
        SELECT t.lease_expires_at > coalesce(sqlc.narg('now')::timestamptz, now()) AS timed_out,
               -- Agentless tasks (no agent) are never lost.
               (t.lease_expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
                AND (a.state = 'offline'
                     OR a.last_heartbeat_at <= coalesce(sqlc.narg('now')::timestamptz, now())
                                               - make_interval(secs => sqlc.arg('silent_seconds')::double precision))
               ) IS TRUE AS lost
    ) k
    WHERE t.state IN ('leased', 'running')
      AND (t.lease_expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
           OR coalesce(t.started_at, t.leased_at)
              + make_interval(secs => t.timeout_seconds
                                      + CASE WHEN t.agent_id IS NULL THEN 0 ELSE sqlc.arg('timeout_grace_seconds')::double precision END)
              <= coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY t.lease_expires_at
    LIMIT @max
    FOR UPDATE OF t SKIP LOCKED
), locked AS (
    -- Executions being completed right now are skipped (their tasks are
    -- reaped next sweep): holding their rows keeps finalizing correct, and
    -- SKIP LOCKED keeps the reaper from waiting while holding task rows.
    SELECT e.id
    FROM ax.execution e
    WHERE e.id IN (SELECT t.execution_id FROM ax.task t JOIN expired x ON x.id = t.id)
    ORDER BY e.id
    FOR UPDATE SKIP LOCKED
), reaped AS (
    UPDATE ax.task t
    SET state = (CASE x.outcome WHEN 'cancel' THEN 'cancelled'
                                WHEN 'rerun' THEN 'pending'
                                WHEN 'retry' THEN 'pending'
                                WHEN 'lost' THEN 'failed'
                                ELSE CASE WHEN x.timed_out THEN 'timed_out' ELSE 'failed' END END)::ax.task_state,
        -- A lost lease keeps the attempt: attempt <= max_attempts holds.
        attempt = CASE WHEN x.outcome = 'retry' THEN t.attempt + 1 ELSE t.attempt END,
        lost_leases = x.lost_leases,
        not_before = CASE x.outcome
                         WHEN 'retry' THEN coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => least(j.retry_backoff_max_seconds,
                                               j.retry_backoff_seconds * power(2, t.attempt - 1)))
                         WHEN 'rerun' THEN coalesce(sqlc.narg('now')::timestamptz, now())
                         ELSE t.not_before END,
        finished_at = CASE WHEN x.outcome IN ('retry', 'rerun') THEN NULL ELSE coalesce(sqlc.narg('now')::timestamptz, now()) END,
        -- A timed-out attempt's agent learns from the lost lease to stop
        -- it; the retry must not inherit a cancel.
        cancel_requested_at = CASE WHEN x.timed_out AND x.outcome = 'end' THEN coalesce(sqlc.narg('now')::timestamptz, now())
                                   ELSE t.cancel_requested_at END,
        -- An adaptive job's retry after a timeout gets twice the timeout
        -- of the attempt before it, up to the job's ceiling (not after a
        -- lost lease: the attempt was not too short).
        timeout_seconds = CASE WHEN x.timed_out AND x.outcome = 'retry' AND j.timeout_mode = 'adaptive'
                               THEN least(j.timeout_seconds, t.timeout_seconds * 2)
                               ELSE t.timeout_seconds END,
        error = CASE WHEN x.outcome = 'lost'
                     THEN 'lost: the lease was lost ' || x.lost_leases || ' times, its agent offline or silent each time'
                     ELSE x.why END,
        -- db.ErrorCodeTimeout, db.ErrorCodeLost, db.ErrorCodeLeaseExpired;
        -- none for a cancelled run's task.
        error_code = CASE WHEN x.timed_out THEN 'timeout'
                          WHEN x.outcome IN ('rerun', 'lost') THEN 'lost'
                          WHEN t.cancel_requested_at IS NULL THEN 'lease_expired' END,
        lease_token = NULL, lease_expires_at = NULL, updated_at = now(),
        lease_event_id = CASE WHEN x.outcome IN ('retry', 'rerun') THEN NULL ELSE t.lease_event_id END
    FROM expired x, ax.job j
    WHERE t.id = x.id AND j.id = t.job_id
      AND t.execution_id IN (SELECT id FROM locked)
    RETURNING t.id, t.execution_id, t.shard_index, t.attempt, t.state, t.agent_id, t.error, t.error_code,
              t.lost_leases, x.timed_out, x.outcome, t.timeout_seconds, j.timeout_mode,
              x.lease_event_id, x.leased_at, x.preferred_agent_id, x.worker_host, x.worker_ip
), events AS (
    -- A retry first records the attempt's own end (timed out, or failed
    -- when its lease ran out), as a result its agent reported would: the
    -- pending event below is the next attempt's. Before both, the lease
    -- of a retry or rerun, from its columns (the row takes the next one).
    INSERT INTO ax.task_event (id, task_id, execution_id, shard_index, attempt, kind, state, agent_id, message,
                               worker_host, worker_ip, error_code, at)
    SELECT r.lease_event_id, r.id, r.execution_id, r.shard_index,
           CASE WHEN r.outcome = 'retry' THEN r.attempt - 1 ELSE r.attempt END, 'state'::ax.task_event_kind,
           'leased'::ax.task_state, r.agent_id, ax.lease_message(r.preferred_agent_id, r.agent_id),
           r.worker_host, r.worker_ip, NULL::text, r.leased_at
    FROM reaped r
    WHERE r.outcome IN ('retry', 'rerun') AND r.lease_event_id IS NOT NULL
    UNION ALL
    SELECT nextval('ax.task_event_id_seq'), r.id, r.execution_id, r.shard_index, r.attempt - 1,
           'state'::ax.task_event_kind,
           (CASE WHEN r.timed_out THEN 'timed_out' ELSE 'failed' END)::ax.task_state, r.agent_id, r.error,
           nullif(w.host_name, ''), w.host_ip, r.error_code, clock_timestamp()
    FROM reaped r
    LEFT JOIN ax.agent w ON w.id = r.agent_id
    WHERE r.outcome = 'retry'
    UNION ALL
    SELECT nextval('ax.task_event_id_seq'), r.id, r.execution_id, r.shard_index, r.attempt,
           'state'::ax.task_event_kind, r.state, r.agent_id,
           CASE WHEN r.outcome = 'rerun'
                THEN r.error || ': runs again at once on the same attempt (lost leases: ' || r.lost_leases || ' of '
                     || @max_lost_leases::integer || ')'
                WHEN r.timed_out AND r.outcome = 'retry' AND r.timeout_mode = 'adaptive'
                THEN r.error || '; the retry gets twice the timeout (at most timeout_seconds): ' || r.timeout_seconds || ' s'
                ELSE r.error END,
           nullif(w.host_name, ''), w.host_ip, r.error_code, clock_timestamp()
    FROM reaped r
    LEFT JOIN ax.agent w ON w.id = r.agent_id
)
SELECT execution_id, state, timed_out, (outcome IN ('rerun', 'lost'))::boolean AS lost FROM reaped;

-- TaskNextLeasable is what the waiting long polls of the agents
-- @agent_ids need, a row each: the agent's state and readiness, and how
-- long until the earliest
-- pending task it could lease becomes leasable (TaskLeasePick's rules):
-- a task routed to it or unassigned at not_before, another's after the
-- steal delays, a pinned one of another never; the job's target labels
-- must be a subset of the agent's (unless routed to it), its executor kind
-- one the agent accepts, and an agent of a label-bound key takes no
-- untargeted job (TaskLeasePick's rules again); a task below its
-- class's priority floor never (a floor that changes NOTIFYs); and a task
-- of a dry class not before the class's next token. An hour when no task
-- qualifies: a NOTIFY or the poll's fallback timer wakes it sooner. One
-- statement for every poll that checks at once (a task-ready NOTIFY wakes
-- all the waiting polls of a replica together), so an idle poll costs a
-- share of one short transaction per check. An agent not found has no row.
-- name: TaskNextLeasable :many
WITH agents AS MATERIALIZED (
    SELECT a.id, a.state, a.ready, a.labels, a.executors, a.label_bound
    FROM ax.agent a
    WHERE a.id = ANY(@agent_ids::uuid[])
), agent_pools AS MATERIALIZED (
    -- Each agent's pools, as TaskLeasePick's: tasks of other pools are
    -- never read here (a busy pool's backlog was read whole by every
    -- other pool's idle poll).
    SELECT a.id AS agent_id, p.id AS pool_id, p.rate_class IS NOT NULL AS classed
    FROM agents a
    JOIN ax.task_pool p ON p.labels_digest = md5('{}')::uuid AND p.executor_kind::text = ANY(a.executors)
    WHERE NOT a.label_bound
    UNION
    SELECT a.id, m.id, m.classed
    FROM agents a
    CROSS JOIN LATERAL jsonb_each(a.labels) l
    CROSS JOIN LATERAL (SELECT p.id, p.rate_class IS NOT NULL AS classed FROM ax.task_pool p
                        WHERE p.target_labels @> jsonb_build_object(l.key, l.value)
                          AND p.target_labels <@ a.labels
                          AND p.executor_kind::text = ANY(a.executors)
                        OFFSET 0) m
), class_tokens AS MATERIALIZED (
    -- When each class has its next token (the level from its lazy
    -- refill): class_heads, pool_bounds and pending read it here.
    SELECT c.name, coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => greatest(0, (1 - least(c.burst, c.tokens + c.rate
                   * greatest(0, extract(epoch FROM coalesce(sqlc.narg('now')::timestamptz, now()) - c.refilled_at)))) / c.rate)) AS token_at
    FROM ax.rate_class c
), class_heads AS MATERIALIZED (
    -- A rate class out of tokens (its next token at least the steal
    -- delays away from its pool's first waiting task that passes the
    -- rules) answers its token's time to every agent of its pool: its
    -- pool is read to that task, not whole. Read whole, a dry class's
    -- backlog (20,000 tasks) was read by every idle check of every agent
    -- of its labels. Pinned tasks are left to pending, read by agent. A
    -- pool whose first task is nearer (it becomes leasable by the steal
    -- rules before the token, for some agent) is read as the other pools
    -- are (pool_rows), for at most the steal delays after its tasks were
    -- written.
    -- The pool's labels and executor kind stand for its tasks (a task
    -- whose job moved since, left here by a fire that raced the move, is
    -- caught up by the reaper): with the first task's job's, an agent
    -- the moved job no longer matches was told nothing of the pool.
    SELECT ap.pool_id, h.not_before, p.target_labels, p.executor_kind::text AS executor_kind, tk.token_at
    FROM (SELECT DISTINCT pool_id FROM agent_pools WHERE classed) ap
    JOIN ax.task_pool p ON p.id = ap.pool_id
    JOIN ax.rate_class c ON c.name = p.rate_class
    JOIN class_tokens tk ON tk.name = p.rate_class
    -- (Walked to its first task that passes: a degraded class's tasks
    -- below its floor are held by the reaper (TaskFloorHold, migration
    -- 00086) and out of this index, so only those written since its last
    -- sweep are read past. Before, the backlog below the floor was read
    -- whole: 20,001 rows a check. Stopped at a cap instead, the pool
    -- would have to be called empty, missing a task above the floor
    -- further on, or left to pool_rows, whose early answer would send
    -- each idle poll to lease in vain about once a second.)
    LEFT JOIN LATERAL (
        SELECT t.not_before
        FROM ax.task t
        WHERE t.pool_id = ap.pool_id AND t.state = 'pending' AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held
          AND NOT t.agentless AND NOT t.pinned
          AND t.priority >= coalesce(c.manual_min_priority,
                                     CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END,
                                     t.priority)
          AND (t.concurrency_key IS NULL
               OR (SELECT count(*) FROM ax.task k
                   WHERE k.concurrency_scope = t.concurrency_scope AND k.concurrency_key = t.concurrency_key
                     AND k.concurrency_key IS NOT NULL AND k.state IN ('leased', 'running')) < t.concurrency_limit)
        ORDER BY t.not_before
        LIMIT 1
    ) h ON true
    WHERE h.not_before IS NULL
       OR h.not_before + make_interval(secs => sqlc.arg('steal_any_seconds')::double precision) <= tk.token_at
), pool_rows AS MATERIALIZED (
    -- Each pool's first 1,000 waiting tasks in not_before order, pool by
    -- pool (each a probe of task_pending_age_idx: as a semi-join on
    -- pool_id, a plan could read every pending task). Read whole, a
    -- tenant's 20,000 tasks waiting to retry in ten minutes were read by
    -- every idle check of every agent of their pool: 60,000 rows, 21 ms
    -- a check. The rest of a longer pool is stood for by pool_bounds.
    -- The columns pending needs are read here: joined back to ax.task
    -- by id, a plan on stale statistics read every pending task into a
    -- hash.
    SELECT ap.pool_id, u.*
    FROM (SELECT pool_id FROM agent_pools EXCEPT SELECT pool_id FROM class_heads) ap
    CROSS JOIN LATERAL (SELECT u.job_id, u.preferred_agent_id, u.fallback_agent_id, u.pinned, u.rate_class, u.priority,
                               u.concurrency_scope, u.concurrency_key, u.concurrency_limit, u.not_before, u.agentless
                        FROM ax.task u
                        WHERE u.pool_id = ap.pool_id AND u.state = 'pending' AND NOT u.no_agent AND NOT u.key_parked AND NOT u.floor_held
                          AND NOT u.pinned
                        ORDER BY u.not_before
                        LIMIT 1000) u
), pool_bounds AS (
    -- A pool with more: no task left unread is ready before the last one
    -- read, so that time answers for them, as if any agent could take
    -- them then. Early, never late: a poll that wakes to find nothing
    -- leases nothing and checks again (backing off), where a late answer
    -- would leave a task waiting.
    SELECT b.not_before, p.target_labels, p.executor_kind::text AS executor_kind,
           c.token_at
    FROM (SELECT r.pool_id, max(r.not_before) AS not_before FROM pool_rows r GROUP BY r.pool_id HAVING count(*) >= 1000) b
    JOIN ax.task_pool p ON p.id = b.pool_id
    LEFT JOIN class_tokens c ON c.name = p.rate_class
    WHERE p.rate_class IS NULL OR c.name IS NOT NULL
), pinned_rows AS MATERIALIZED (
    -- Each checking agent's first 1,000 pinned tasks in not_before order
    -- (task_pinned_pending_idx), agent by agent, as pool_rows reads a
    -- pool: read whole, an agent's 5,000 pinned tasks waiting to retry
    -- were read by every check, which a replica's waiting polls share.
    SELECT a.id AS agent_id, u.*
    FROM agents a
    CROSS JOIN LATERAL (SELECT u.job_id, u.preferred_agent_id, u.fallback_agent_id, u.pinned, u.rate_class, u.priority,
                               u.concurrency_scope, u.concurrency_key, u.concurrency_limit, u.not_before, u.agentless
                        FROM ax.task u
                        WHERE u.pinned AND u.state = 'pending' AND u.preferred_agent_id = a.id
                          AND NOT u.key_parked AND NOT u.no_agent AND NOT u.floor_held
                        ORDER BY u.not_before
                        LIMIT 1000) u
), pinned_bounds AS MATERIALIZED (
    -- The agents with more pinned tasks than pinned_rows read, and the
    -- last one read's time: no unread task is ready before it.
    SELECT r.agent_id, max(r.not_before) AS not_before
    FROM pinned_rows r
    GROUP BY r.agent_id
    HAVING count(*) >= 1000
), pinned_rest AS MATERIALIZED (
    -- An agent whose first 1,000 are all ready yet none was leasable (its
    -- class out of tokens, its job's executor changed): that time, past,
    -- would answer "now" to every check, and its poll would lease nothing
    -- and check again, on and on. Its rest is read, as before pinned_rows.
    SELECT b.agent_id, u.*
    FROM pinned_bounds b
    CROSS JOIN LATERAL (SELECT u.job_id, u.preferred_agent_id, u.fallback_agent_id, u.pinned, u.rate_class, u.priority,
                               u.concurrency_scope, u.concurrency_key, u.concurrency_limit, u.not_before, u.agentless
                        FROM ax.task u
                        WHERE u.pinned AND u.state = 'pending' AND u.preferred_agent_id = b.agent_id
                          AND NOT u.key_parked AND NOT u.no_agent AND NOT u.floor_held
                          AND u.not_before >= b.not_before) u
    WHERE b.not_before <= coalesce(sqlc.narg('now')::timestamptz, statement_timestamp())
), pending AS MATERIALIZED (
    -- What the min below needs of the pending tasks, read once for all
    -- the agents checking (and only when some agent has nothing leasable
    -- now: a CTE is read as it is scanned): the earliest not_before of
    -- each group of tasks alike for every rule below, with its job's
    -- labels and executor and its class's next token. A probe of ax.job
    -- per task and agent cost 5 ms a check with 2,000 pending tasks routed
    -- to other agents (BenchmarkManyAgents); a group is mostly a job's
    -- tasks routed to one agent.
    SELECT g.preferred_agent_id, g.fallback_agent_id, g.pinned, g.not_before,
           j.target_labels, j.executor_kind::text AS executor_kind,
           -- A dry class's next token; null, so ignored by greatest,
           -- without a class.
           tk.token_at, NULL::uuid AS bound_for
    FROM (SELECT t.job_id, t.preferred_agent_id, t.fallback_agent_id, t.pinned, t.rate_class,
                 CASE WHEN t.rate_class IS NOT NULL THEN t.priority END AS priority,
                 t.concurrency_scope, t.concurrency_key, t.concurrency_limit, min(t.not_before) AS not_before
          -- The agents' pools (pool_rows), and the tasks pinned to them,
          -- read by agent (pinned_rows; pool_rows leaves pinned tasks out: another
          -- agent's were read and dropped, migration 00087). A parked task is not leasable until a
          -- lease unparks it (behind its key) or the reaper does (no
          -- agent: TaskNoAgentUnpark).
          FROM (SELECT r.job_id, r.preferred_agent_id, r.fallback_agent_id, r.pinned, r.rate_class, r.priority,
                       r.concurrency_scope, r.concurrency_key, r.concurrency_limit, r.not_before, r.agentless
                FROM pool_rows r
                UNION ALL
                SELECT u.job_id, u.preferred_agent_id, u.fallback_agent_id, u.pinned, u.rate_class, u.priority,
                       u.concurrency_scope, u.concurrency_key, u.concurrency_limit, u.not_before, u.agentless
                FROM pinned_rows u
                UNION ALL
                SELECT u.job_id, u.preferred_agent_id, u.fallback_agent_id, u.pinned, u.rate_class, u.priority,
                       u.concurrency_scope, u.concurrency_key, u.concurrency_limit, u.not_before, u.agentless
                FROM pinned_rest u) t
          WHERE NOT t.agentless
          GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9) g
    JOIN ax.job j ON j.id = g.job_id
    LEFT JOIN ax.rate_class c ON c.name = g.rate_class
    LEFT JOIN class_tokens tk ON tk.name = g.rate_class
    -- A task whose key is at its limit is not leasable until one of the
    -- key's ends (TaskComplete and the reaper NOTIFY then).
    WHERE (g.concurrency_key IS NULL
           OR (SELECT count(*) FROM ax.task k
               WHERE k.concurrency_scope = g.concurrency_scope AND k.concurrency_key = g.concurrency_key
                 AND k.concurrency_key IS NOT NULL AND k.state IN ('leased', 'running')) < g.concurrency_limit)
      AND (g.rate_class IS NULL
           OR (c.name IS NOT NULL
               AND g.priority >= coalesce(c.manual_min_priority,
                                          CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END,
                                          g.priority)))
    UNION ALL
    -- A dry class's pool: its first task, as if for anyone now (the token
    -- comes after it is leasable for every agent).
    SELECT NULL, NULL, false, h.not_before, h.target_labels, h.executor_kind, h.token_at, NULL
    FROM class_heads h
    WHERE h.not_before IS NOT NULL
    UNION ALL
    SELECT NULL, NULL, false, b.not_before, b.target_labels, b.executor_kind, b.token_at, NULL
    FROM pool_bounds b
    UNION ALL
    -- An agent with more pinned tasks than pinned_rows read, the last one
    -- read ahead: no task left unread is ready before it, so that time
    -- answers for them, for that agent alone (bound_for; the rules are
    -- not applied to tasks not read). Early, never late, as pool_bounds,
    -- and ahead: the poll wakes then, once, and checks again.
    SELECT NULL, NULL, false, b.not_before, NULL, NULL, NULL, b.agent_id
    FROM pinned_bounds b
    WHERE b.not_before > coalesce(sqlc.narg('now')::timestamptz, statement_timestamp())
)
SELECT a.id, a.state::text AS state, a.ready,
       -- A key freed places that no lease has unparked yet: a lease now
       -- unparks its waiting tasks (see LeaseBroker.unpark).
       EXISTS (SELECT 1 FROM ax.concurrency_key_freed)::boolean AS keys_freed,
       CASE WHEN EXISTS (
           -- A task leasable now (a poll that leased nothing while a
           -- backlog waits, when another agent's lease took the rows it
           -- would have) answers 0 from the first such row, without the
           -- min below. Same rules as the min; a task of a rate class is
           -- left to it.
           -- Read pool by pool, in a lateral a join cannot turn into a
           -- read of every pending task (a task pinned to the agent is
           -- left to the min, which reads them by agent: in the pools,
           -- another agent's pinned tasks were read and dropped, 00087),
           -- and only the pools of no rate class (00081).
           SELECT 1
           FROM agent_pools ap
           CROSS JOIN LATERAL (
               SELECT 1
               FROM ax.task t
               JOIN ax.job j ON j.id = t.job_id
               WHERE t.pool_id = ap.pool_id
                 AND t.state = 'pending' AND NOT t.agentless AND t.rate_class IS NULL
                 -- (Implied by the rules below: bounds the index's range,
                 -- which clock_timestamp(), volatile, did not: a pool's
                 -- tasks waiting to retry were read whole, 20,000 rows.)
                 AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, statement_timestamp())
                 AND (t.preferred_agent_id = a.id OR j.target_labels <@ a.labels)
                 AND j.executor_kind::text = ANY(a.executors)
                 AND (NOT a.label_bound OR j.target_labels <> '{}'::jsonb)
                 AND NOT t.pinned AND NOT t.key_parked AND NOT t.no_agent AND NOT t.floor_held
                 AND ((t.preferred_agent_id IS NULL OR t.preferred_agent_id = a.id)
                          AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, clock_timestamp())
                      OR (t.fallback_agent_id IS NULL OR t.fallback_agent_id = a.id)
                          AND t.not_before <= coalesce(sqlc.narg('now')::timestamptz, clock_timestamp())
                                              - make_interval(secs => sqlc.arg('steal_seconds')::double precision)
                      OR t.not_before <= coalesce(sqlc.narg('now')::timestamptz, clock_timestamp())
                                         - make_interval(secs => sqlc.arg('steal_any_seconds')::double precision))
                 AND (t.concurrency_key IS NULL
                      OR (SELECT count(*) FROM ax.task k
                          WHERE k.concurrency_scope = t.concurrency_scope AND k.concurrency_key = t.concurrency_key
                            AND k.concurrency_key IS NOT NULL AND k.state IN ('leased', 'running')) < t.concurrency_limit)
               LIMIT 1) x
           WHERE ap.agent_id = a.id AND NOT ap.classed)
       THEN 0::bigint ELSE
       coalesce((extract(epoch FROM (
           SELECT min(greatest(
                      CASE WHEN p.preferred_agent_id IS NULL OR p.preferred_agent_id = a.id THEN p.not_before
                           WHEN p.fallback_agent_id IS NULL OR p.fallback_agent_id = a.id
                                THEN p.not_before + make_interval(secs => sqlc.arg('steal_seconds')::double precision)
                           ELSE p.not_before + make_interval(secs => sqlc.arg('steal_any_seconds')::double precision)
                      END,
                      p.token_at))
           FROM pending p
           WHERE p.bound_for = a.id
              OR p.bound_for IS NULL
                 AND (p.preferred_agent_id = a.id OR p.target_labels <@ a.labels)
                 AND p.executor_kind = ANY(a.executors)
                 AND (NOT a.label_bound OR p.target_labels <> '{}'::jsonb)
                 AND NOT (p.pinned AND p.preferred_agent_id <> a.id)
       ) - coalesce(sqlc.narg('now')::timestamptz, clock_timestamp())) * 1000)::bigint, 3600000) END::bigint AS millis
FROM agents a;

-- TaskPlanForExecutions plans the pending tasks of each execution in
-- @execution_ids, not leasable before its scheduled time (a fire made
-- ahead waits for its tick): one per shard, with the shard's param or its
-- part of the job's shard range (exact integer division in numeric: a
-- range may span all of bigint, and numeric's / would round); for
-- broadcast jobs one per live agent of the pool that accepts its executor
-- kind, pinned to it. Tasks of agentless jobs (job.agentless, see
-- db.Job.Agentless) are marked so: ax serve runs them, agents never lease them.
-- Ids that were not inserted (a tick that had fired already) match nothing.
-- A run whose job has a shard generator takes its params from
-- @generated_params instead (a JSON array of strings per id of
-- @generated_ids, rendered in Go by db.ShardGenerator).
-- Returns each task to insert (TaskInsertPlanned; the caller gives it
-- its id, a UUIDv7 made in Go: 1.9 µs a task as ax.uuid_v7() here) and
-- what routing needs to know of it: the router decides before the insert,
-- so a routed task is written once (a later update of its preferred agent
-- would be a second row version and index entries, never HOT). Broadcast
-- runs get their shard count here (failed when no agent is live).
--
-- Timeouts: a fixed job's tasks get its timeout_seconds. An adaptive
-- job's get 3 × the P95 of its recent successful attempts (lease to
-- result), at least 5 s and at most timeout_seconds, or timeout_seconds
-- without history. The history is measured here when the job's stored
-- measure (ax.job_timeout_measure) is missing or older than
-- @measure_max_age_seconds, and the new measure stored: at most once a
-- minute a job reads its latest successful runs from history, at most
-- 100 and none older than 24 h, and their durations (ax.job_success_p95).
-- One fire measures at most @measure_max_jobs
-- jobs (never measured first, then the oldest measures), so a burst of
-- adaptive jobs does not hold up a fire; the others use their stored
-- measure (or the ceiling) until a later fire. Fires of fixed jobs read
-- nothing of this. (The rule is db.Job.AdaptiveTimeout in Go,
-- which shows it; TestAdaptiveTimeoutFollowsHistory holds the two equal.)
-- name: TaskPlanForExecutions :many
WITH execs AS (
    SELECT e.id, e.job_id, e.shard_count, e.priority, e.scheduled_for, e.params, e.cause, j.jitter_seconds,
           j.shard_params, j.shard_range_from, j.shard_range_to, j.retry_max_attempts, j.timeout_seconds,
           j.route_strategy, j.route_key, j.target_labels, j.name AS job_name, j.group_name, j.rate_limit_class,
           j.executor_kind, j.agentless, j.timeout_mode,
           j.concurrency_key, j.concurrency_limit, j.concurrency_group, j.pool_id
    FROM ax.execution e
    -- A probe of job_pkey per run, as in ExecutionInsertMany (see there).
    CROSS JOIN LATERAL (SELECT * FROM ax.job j WHERE j.id = e.job_id LIMIT 1) j
    WHERE e.id = ANY(@execution_ids::uuid[])
), generated AS (
    SELECT unnest(@generated_ids::uuid[]) AS execution_id, unnest(@generated_params::jsonb[]) AS params
), adaptive AS (
    -- The adaptive jobs of these runs, with their stored measure if any.
    SELECT DISTINCT ON (x.job_id) x.job_id, m.samples, m.p95_ms, m.computed_at,
           (m.job_id IS NULL OR m.computed_at <= now() - make_interval(secs => @measure_max_age_seconds::double precision)) AS stale
    FROM execs x
    LEFT JOIN ax.job_timeout_measure m ON m.job_id = x.job_id
    WHERE x.timeout_mode = 'adaptive'
    ORDER BY x.job_id
), to_measure AS (
    -- Jobs never measured first, then the oldest measures.
    SELECT job_id FROM adaptive WHERE stale
    ORDER BY computed_at NULLS FIRST
    LIMIT @measure_max_jobs::integer
), measured AS (
    -- (From the limited list, so only those are measured: a filter on
    -- adaptive would be applied after the lateral join.)
    SELECT a.job_id, h.samples, h.p95_ms
    FROM to_measure a
    -- A function (migration 00068): the history's partitions are planned
    -- only when an adaptive job is measured, not for every fire.
    CROSS JOIN LATERAL ax.job_success_p95(a.job_id) AS h(samples, p95_ms)
), stored AS (
    -- In job order, so fires of several jobs never wait on each other crosswise.
    INSERT INTO ax.job_timeout_measure AS m (job_id, samples, p95_ms, computed_at)
    SELECT job_id, samples, p95_ms, now() FROM measured ORDER BY job_id
    ON CONFLICT (job_id) DO UPDATE
    SET samples = excluded.samples, p95_ms = excluded.p95_ms, computed_at = excluded.computed_at
), timeouts AS (
    SELECT a.job_id,
           CASE WHEN m.job_id IS NOT NULL THEN m.samples ELSE a.samples END AS samples,
           CASE WHEN m.job_id IS NOT NULL THEN m.p95_ms ELSE a.p95_ms END AS p95_ms
    FROM adaptive a
    LEFT JOIN measured m ON m.job_id = a.job_id
), shards AS (
    SELECT x.id AS execution_id, s.i, x.shard_count AS n, NULL::uuid AS agent_id
    FROM execs x
    CROSS JOIN LATERAL generate_series(0, x.shard_count - 1) AS s(i)
    WHERE x.route_strategy <> 'broadcast'
    UNION ALL
    SELECT x.id, (row_number() OVER w - 1)::integer, (count(*) OVER (PARTITION BY x.id))::integer, a.id
    FROM execs x
    JOIN ax.agent a ON a.labels @> x.target_labels AND x.executor_kind::text = ANY(a.executors)
         AND (NOT a.label_bound OR x.target_labels <> '{}'::jsonb)
    WHERE x.route_strategy = 'broadcast' AND a.state = 'active' AND a.ready
      AND a.last_heartbeat_at > now() - make_interval(secs => sqlc.arg('live_seconds')::double precision)
    WINDOW w AS (PARTITION BY x.id ORDER BY a.id)
), planned AS (
    -- (No id: the caller makes the tasks' ids, as it makes the runs'.)
    SELECT x.id AS execution_id, x.job_id, s.i AS shard_index, s.n AS shard_total,
           CASE WHEN g.params ->> s.i IS NOT NULL THEN g.params ->> s.i
                WHEN jsonb_array_length(x.shard_params) > s.i THEN x.shard_params ->> s.i
                ELSE (x.shard_range_from + div((x.shard_range_to::numeric - x.shard_range_from) * s.i, s.n))::bigint
                     || '-' ||
                     (x.shard_range_from + div((x.shard_range_to::numeric - x.shard_range_from) * (s.i + 1), s.n))::bigint
           END AS shard_param,
           x.priority, x.retry_max_attempts AS max_attempts,
           CASE WHEN tm.samples > 0
                THEN least(x.timeout_seconds, greatest(5, ceil(3 * tm.p95_ms / 1000.0)))::integer
                ELSE x.timeout_seconds END AS timeout_seconds,
           -- A scheduled run's tasks wait for its tick plus the job's jitter
           -- (the offset's md5 only for a job that has jitter: 3 µs a run).
           greatest(x.scheduled_for + CASE WHEN x.cause IN ('schedule', 'catch_up') AND x.jitter_seconds > 0
                                           THEN ax.jitter_offset(x.job_id, x.scheduled_for, x.jitter_seconds)
                                           ELSE interval '0' END, now()) AS not_before,
           s.agent_id AS pinned_agent_id, coalesce(x.rate_limit_class, '') AS rate_class, x.agentless,
           x.route_strategy, x.route_key, x.target_labels, x.params, x.job_name, x.group_name,
           x.executor_kind::text AS executor_kind,
           x.concurrency_key, x.concurrency_limit, x.concurrency_group, x.pool_id
    FROM shards s
    JOIN execs x ON x.id = s.execution_id
    LEFT JOIN generated g ON g.execution_id = s.execution_id
    LEFT JOIN timeouts tm ON tm.job_id = x.job_id
), shard_counts AS (
    -- A broadcast run has as many shards as live agents, maybe none.
    UPDATE ax.execution e
    SET shard_count = greatest(c.n, 1),
        state = CASE WHEN c.n = 0 THEN 'failed'::ax.execution_state ELSE e.state END,
        finished_at = CASE WHEN c.n = 0 THEN now() ELSE e.finished_at END,
        error = CASE WHEN c.n = 0 THEN 'broadcast found no live, ready agent matching the job''s target labels and accepting its executor' END
    FROM (SELECT x.id, count(s.i)::integer AS n
          FROM execs x LEFT JOIN shards s ON s.execution_id = x.id
          WHERE x.route_strategy = 'broadcast'
          GROUP BY x.id) c
    WHERE e.id = c.id
)
SELECT p.execution_id, p.job_id, p.shard_index::integer AS shard_index, p.shard_total,
       p.shard_param::text AS shard_param, p.priority, p.max_attempts, p.timeout_seconds::integer AS timeout_seconds,
       p.not_before::timestamptz AS not_before, p.pinned_agent_id, p.rate_class::text AS rate_class,
       p.agentless, p.route_strategy, p.route_key, p.target_labels,
       -- The run's params once, on its first shard (the caller gives them
       -- to the rest): on every row, a run of 10,000 shards with params
       -- of 256 KiB brought 2.5 GB into the server.
       (CASE WHEN p.shard_index = 0 THEN p.params END)::jsonb AS params, p.job_name, p.group_name, p.executor_kind,
       p.concurrency_key AS concurrency_template, coalesce(p.concurrency_limit, 0)::integer AS concurrency_limit,
       p.concurrency_group,
       -- Where leases look for it (migration 00079); agentless: nowhere.
       (CASE WHEN p.agentless THEN -1 ELSE p.pool_id END)::integer AS pool_id
FROM planned p
ORDER BY p.execution_id, p.shard_index;

-- TaskInsertPlanned writes the tasks TaskPlanForExecutions planned, with
-- their routes (the nil UUID: no preference; a pinned task's agent is its
-- preferred one) and their rendered concurrency keys ('' scope: none). A
-- task whose key did not render (@key_errors not '') is written failed
-- with error code concurrency_key_invalid: it could not be held to its
-- limit, and a fire must not stop for one run's params. @params_bytes is
-- the size of each task's run params (0: none), for the lease's budget.
-- @no_agent parks a task no live agent could take (the router found no
-- candidate for its job): see TaskNoAgentUnpark.
-- @pool_ids are the tasks' pools (the plan's pool_id: migration 00079).
-- name: TaskInsertPlanned :exec
INSERT INTO ax.task (id, execution_id, job_id, shard_index, shard_total, shard_param, priority, max_attempts,
                     timeout_seconds, not_before, preferred_agent_id, fallback_agent_id, route_key, pinned,
                     rate_class, agentless, concurrency_scope, concurrency_key, concurrency_limit,
                     params_bytes, no_agent, pool_id, state, error, error_code, finished_at)
SELECT id, execution_id, job_id, shard_index, shard_total, shard_param, priority, max_attempts,
       timeout_seconds, not_before, nullif(preferred, '00000000-0000-0000-0000-000000000000'),
       nullif(fallback, '00000000-0000-0000-0000-000000000000'), route_key, pinned, nullif(rate_class, ''), agentless,
       CASE WHEN key_error = '' THEN nullif(scope, '') END,
       CASE WHEN key_error = '' AND scope <> '' THEN key END,
       CASE WHEN key_error = '' AND scope <> '' THEN key_limit END,
       nullif(params_bytes, 0), no_agent, pool_id,
       CASE WHEN key_error = '' THEN 'pending' ELSE 'failed' END::ax.task_state,
       nullif(key_error, ''),
       CASE WHEN key_error <> '' THEN 'concurrency_key_invalid' END,
       CASE WHEN key_error <> '' THEN now() END
FROM (SELECT unnest(@ids::uuid[]) AS id,
             unnest(@execution_ids::uuid[]) AS execution_id,
             unnest(@job_ids::uuid[]) AS job_id,
             unnest(@shard_indexes::integer[]) AS shard_index,
             unnest(@shard_totals::integer[]) AS shard_total,
             unnest(@shard_params::text[]) AS shard_param,
             unnest(@priorities::integer[]) AS priority,
             unnest(@max_attempts::integer[]) AS max_attempts,
             unnest(@timeout_seconds::integer[]) AS timeout_seconds,
             unnest(@not_befores::timestamptz[]) AS not_before,
             unnest(@preferred::uuid[]) AS preferred,
             unnest(@fallback::uuid[]) AS fallback,
             unnest(@route_keys::text[]) AS route_key,
             unnest(@pinned::boolean[]) AS pinned,
             unnest(@rate_classes::text[]) AS rate_class,
             unnest(@agentless::boolean[]) AS agentless,
             unnest(@concurrency_scopes::text[]) AS scope,
             unnest(@concurrency_keys::text[]) AS key,
             unnest(@concurrency_limits::integer[]) AS key_limit,
             unnest(@key_errors::text[]) AS key_error,
             unnest(@params_bytes::integer[]) AS params_bytes,
             unnest(@no_agent::boolean[]) AS no_agent,
             unnest(@pool_ids::integer[]) AS pool_id) t;

-- TaskListByExecution returns an execution's tasks in shard order, their
-- results and errors (listed) only from shard @shards_from on, for at
-- most @max_listed tasks and while their size stays within @max_bytes
-- (the first one whatever its size); omitted says a task has a result or
-- error not given. Unbounded, a run of 10,000 shards with results of 1
-- MiB was 10 GB read into the replica for one GET. The size is measured
-- without reading the values: an error's octet_length, and a result's
-- stored size, 32 times (at most 1 MiB, the most a result may be) when
-- Postgres compressed it. Text may be many times its compressed size: 1
-- MiB of one repeated character is stored in 12 KB (pglz, 87:1), so such
-- results may fill an answer of about 25 MiB; realistic JSON rows
-- compress about 8:1 and count as what they are.
-- name: TaskListByExecution :many
SELECT t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.state, t.priority,
       t.attempt, t.max_attempts, t.lost_leases, t.timeout_seconds, t.not_before, t.agent_id, t.leased_at,
       t.started_at, t.finished_at, t.cancel_requested_at,
       (CASE WHEN t.listed THEN t.result END)::jsonb AS result,
       coalesce(CASE WHEN t.listed THEN t.error END, '')::text AS error,
       t.error_code, t.created_at, t.updated_at,
       (NOT t.listed AND (t.result IS NOT NULL OR t.error IS NOT NULL))::boolean AS omitted
FROM (SELECT t.*,
             (t.shard_index >= @shards_from::integer
              AND (t.nth = 1 OR (t.nth <= @max_listed::integer AND t.listed_bytes <= @max_bytes::bigint))) AS listed
      FROM (SELECT t.*,
                   count(*) FILTER (WHERE t.shard_index >= @shards_from::integer) OVER w AS nth,
                   sum(coalesce(CASE WHEN pg_column_compression(t.result) IS NULL THEN pg_column_size(t.result)
                                     ELSE least(pg_column_size(t.result) * 32, 1048576) END, 0)
                       + coalesce(octet_length(t.error), 0))
                       FILTER (WHERE t.shard_index >= @shards_from::integer) OVER w AS listed_bytes
            FROM ax.all_tasks t
            WHERE t.execution_id = @execution_id
            WINDOW w AS (ORDER BY t.shard_index)) t) t
ORDER BY t.shard_index;

-- TaskSkipBelowFloor cancels up to @max waiting tasks under their
-- class's floor whose job says to skip rather than wait, with the reason
-- in the task's error and events. Each class is read in its index's
-- range below its floor (task_floor_unheld_idx, in index order: a plan on
-- statistics taken while the backlog was not yet held read ax.task
-- whole), and held tasks are not read: their jobs waited when the hold
-- (below) looked, and a job switched to skip since lets go of its held
-- tasks (ax.job_skips_below_floor, migration 00088). Read every sweep,
-- the held backlog was read whole every sweep. Rows being changed are
-- skipped for the next sweep.
-- name: TaskSkipBelowFloor :many
WITH floors AS MATERIALIZED (
    SELECT c.name, coalesce(c.manual_min_priority,
                            CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END) AS floor
    FROM ax.rate_class c
), doomed AS (
    -- Each class's first @max tasks in the range, whatever their job
    -- says, and of those the skipping jobs', locked: the range holds the
    -- waiting jobs' tasks too until the hold has moved them (an automatic
    -- floor's after 10 s, 2,000 a sweep), and read to the skipping jobs'
    -- tasks it was the class's whole backlog every sweep meanwhile
    -- (40,002 rows). A skipping job's task further on is skipped once the
    -- hold has moved those before it.
    SELECT u.id, f.name, f.floor
    FROM floors f
    CROSS JOIN LATERAL (
        SELECT c.id
        FROM (SELECT v.id, v.job_id FROM ax.task v
              WHERE v.rate_class = f.name AND v.priority < f.floor AND v.state = 'pending' AND NOT v.floor_held
              ORDER BY v.priority
              LIMIT @max::integer) c
        JOIN ax.job j ON j.id = c.job_id
        WHERE j.degrade_action = 'skip') c
    JOIN ax.task u ON u.id = c.id
    WHERE f.floor IS NOT NULL AND u.state = 'pending' AND NOT u.floor_held
    FOR UPDATE OF u SKIP LOCKED
), skipped AS (
    UPDATE ax.task t
    SET state = 'cancelled', finished_at = now(), updated_at = now(),
        error = 'skipped: rate class ' || d.name || ' is degraded to priority >= ' || d.floor, error_code = NULL
    FROM doomed d
    WHERE t.id = d.id
    RETURNING t.id, t.execution_id, t.shard_index, t.attempt, t.error
), events AS (
    INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message)
    SELECT id, execution_id, shard_index, attempt, 'state', 'cancelled', error FROM skipped
)
SELECT DISTINCT execution_id FROM skipped;

-- TaskFloorHold holds up to @max waiting tasks below their class's floor
-- (floor_held, migration 00086): they leave the indexes of the lease's
-- pick and of the long polls' check. Before, every lease given the
-- class's tokens, and every idle agent's check of its labels, read past
-- them: a class degrades when its backlog is deep, so exactly then.
-- Tasks of jobs that skip rather than wait are left to the skip (the
-- job's row is read, as a fire may commit one between the two). An
-- automatic floor holds once it has been in force @settle_seconds: a
-- class whose depth hovers at its threshold, degrading and recovering
-- sweep after sweep, would have its backlog rewritten both ways each
-- time. Each class is read in its index's range below its floor
-- (task_floor_unheld_idx, in index order), so neither tasks at or above
-- it nor those held already are read. Agentless tasks are held too
-- (TaskLeaseAgentless leases by id, checks the floor itself and clears
-- floor_held). Row locks are skipped: a task being leased or cancelled is
-- held by a later call, if still pending. Returns how many it held.
-- name: TaskFloorHold :one
WITH floors AS MATERIALIZED (
    SELECT c.name, coalesce(c.manual_min_priority,
                            CASE WHEN c.degraded_since <= now() - make_interval(secs => @settle_seconds::double precision)
                                 THEN c.auto_min_priority END) AS floor
    FROM ax.rate_class c
), held AS (
    UPDATE ax.task t SET floor_held = true
    FROM (SELECT u.id
          FROM floors f
          CROSS JOIN LATERAL (
              SELECT u.id FROM ax.task u
              JOIN ax.job j ON j.id = u.job_id
              WHERE u.rate_class = f.name AND u.priority < f.floor
                AND u.state = 'pending' AND NOT u.floor_held AND j.degrade_action <> 'skip'
              ORDER BY u.priority
              LIMIT @max::integer
              -- The job's row shared: a job switching to skip (its
              -- update holds the row) is passed over until it commits,
              -- else its task was held after its trigger let go of the
              -- job's held tasks, and never skipped.
              FOR UPDATE OF u SKIP LOCKED
              FOR SHARE OF j SKIP LOCKED) u
          WHERE f.floor IS NOT NULL
          LIMIT @max::integer) h
    WHERE t.id = h.id
    RETURNING 1
)
SELECT count(*)::integer FROM held;

-- TaskFloorRelease releases up to @max held tasks (TaskFloorHold) that
-- their class's floor no longer turns away: the class was restored, its
-- floor lowered, or the class is gone. Highest priority first. Each class
-- is read in its held index's range at or above its floor. Returns how
-- many it released.
-- name: TaskFloorRelease :one
WITH RECURSIVE held_classes(name) AS (
    -- The classes with held tasks (a skip scan of task_floor_held_idx, one
    -- probe a class), so a class deleted since is released too.
    (SELECT t.rate_class FROM ax.task t
     WHERE t.floor_held AND t.state = 'pending'
     ORDER BY t.rate_class LIMIT 1)
    UNION ALL
    SELECT (SELECT t.rate_class FROM ax.task t
            WHERE t.floor_held AND t.state = 'pending' AND t.rate_class > h.name
            ORDER BY t.rate_class LIMIT 1)
    FROM held_classes h
    WHERE h.name IS NOT NULL
), floors AS MATERIALIZED (
    SELECT h.name, coalesce(c.manual_min_priority,
                            CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END,
                            -2147483648) AS floor
    FROM held_classes h
    LEFT JOIN ax.rate_class c ON c.name = h.name
    WHERE h.name IS NOT NULL
), released AS (
    UPDATE ax.task t SET floor_held = false
    FROM (SELECT u.id
          FROM floors f
          CROSS JOIN LATERAL (
              SELECT u.id FROM ax.task u
              WHERE u.rate_class = f.name AND u.priority >= f.floor
                AND u.state = 'pending' AND u.floor_held
              ORDER BY u.priority DESC
              LIMIT @max::integer
              FOR UPDATE OF u SKIP LOCKED) u
          LIMIT @max::integer) r
    WHERE t.id = r.id
    RETURNING 1
)
SELECT count(*)::integer FROM released;

-- TaskCountBacklog counts ready pending tasks per rate class and priority,
-- with the oldest wait of each, parked tasks (no agent, or behind their
-- key), pinned ones and tasks held below their class's floor too: in
-- five parts, each read through an index (task_pending_age_idx holds
-- none of them, task_no_agent_idx, task_concurrency_parked_idx,
-- task_floor_held_idx and task_pinned_pending_idx each one kind; a task
-- is counted in one part).
-- A metrics query: every replica reads the same shared rows, so all
-- replicas report the same numbers.
-- name: TaskCountBacklog :many
SELECT coalesce(rate_class, '')::text AS class, priority,
       count(*)::bigint AS depth,
       coalesce(extract(epoch FROM clock_timestamp() - min(not_before)), 0)::double precision AS oldest_seconds
FROM (SELECT rate_class, priority, not_before FROM ax.task
      WHERE state = 'pending' AND NOT no_agent AND NOT key_parked AND NOT floor_held AND NOT pinned AND not_before <= now()
      UNION ALL
      SELECT rate_class, priority, not_before FROM ax.task
      WHERE state = 'pending' AND pinned AND NOT floor_held AND NOT key_parked AND NOT no_agent AND not_before <= now()
      UNION ALL
      SELECT rate_class, priority, not_before FROM ax.task
      WHERE state = 'pending' AND floor_held AND NOT key_parked AND NOT no_agent AND not_before <= now()
      UNION ALL
      SELECT rate_class, priority, not_before FROM ax.task
      WHERE state = 'pending' AND key_parked AND NOT no_agent AND not_before <= now()
      UNION ALL
      SELECT rate_class, priority, not_before FROM ax.task
      WHERE state = 'pending' AND no_agent AND not_before <= now()) t
GROUP BY 1, 2;

-- Agentless HTTP tasks: tasks of jobs with executor http and no target
-- labels, sent by ax serve itself (River workers). They use the task
-- state machine above: a lease token fences the result, TaskComplete
-- records it (retries after the job's backoff), the reaper times them out.

-- TaskLeaseAgentless takes attempt @attempt of an agentless task that is due:
-- it runs from now with a fresh token (the completion token a target that
-- answers 202 sends back), its deadline is now + the task's timeout, and
-- its lease lasts @grace_seconds longer so the reaper times it out rather
-- than calls it lost. A task of a rate class takes one token from its
-- bucket (refilled lazily from now()) and must be at or above the class's
-- priority floor, as agents' leases do. Returns nothing when the task is
-- not pending at that attempt, not due, or its class holds it back.
-- name: TaskLeaseAgentless :one
WITH candidate AS (
    SELECT t.id, t.rate_class, t.priority
    FROM ax.task t
    WHERE t.id = @id AND t.attempt = @attempt AND t.state = 'pending' AND t.agentless AND t.not_before <= now()
), token AS (
    UPDATE ax.rate_class c
    SET tokens = least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at))) - 1,
        refilled_at = greatest(c.refilled_at, now())
    FROM candidate x
    WHERE c.name = x.rate_class
      AND least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at))) >= 1
      AND x.priority >= coalesce(c.manual_min_priority,
                                 CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END, x.priority)
    RETURNING c.name
), leased AS (
    UPDATE ax.task t
    SET state = 'running', lease_token = gen_random_uuid(), agent_id = NULL,
        leased_at = now(), started_at = now(), cancel_requested_at = NULL,
        -- Held below a floor that lifted since (TaskFloorHold): leased now.
        floor_held = false,
        lease_expires_at = now() + make_interval(secs => t.timeout_seconds + sqlc.arg('grace_seconds')::double precision),
        updated_at = now()
    FROM candidate x
    WHERE t.id = x.id AND t.attempt = @attempt AND t.state = 'pending'
      AND (x.rate_class IS NULL OR EXISTS (SELECT 1 FROM token))
    RETURNING t.id, t.execution_id, t.job_id, t.shard_index, t.shard_total, t.shard_param, t.attempt,
              t.max_attempts, t.timeout_seconds, t.lease_token, t.started_at
), started AS (
    UPDATE ax.execution e
    SET state = 'running', started_at = coalesce(e.started_at, now()), updated_at = now()
    WHERE e.id IN (SELECT execution_id FROM leased) AND e.state = 'pending'
), events AS (
    INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message)
    SELECT id, execution_id, shard_index, attempt, 'state', 'running', 'sent by ax serve (agentless http)'
    FROM leased
)
SELECT l.id, l.execution_id, l.job_id, l.shard_index, l.shard_total, l.shard_param, l.attempt,
       l.max_attempts, l.timeout_seconds, l.lease_token::uuid AS lease_token,
       (l.started_at + make_interval(secs => l.timeout_seconds))::timestamptz AS deadline,
       j.executor, j.name AS job_name, e.params, e.scheduled_for, e.priority,
       coalesce(e.traceparent, '')::text AS traceparent,
       coalesce(s.secret, '')::text AS secret,
       coalesce(CASE WHEN s.previous_expires_at > now() THEN s.previous_secret END, '')::text AS previous_secret
FROM leased l
JOIN ax.job j ON j.id = l.job_id
JOIN ax.execution e ON e.id = l.execution_id
LEFT JOIN ax.job_secret s ON s.job_id = l.job_id;

-- TaskGetStatus says where a task is, for a worker that could not lease
-- it: its state and attempt, when it is due, its deadline while it runs,
-- and, for a due task its rate class holds back, how long until the
-- class's next token (by the database clock, returned as now).
-- name: TaskGetStatus :one
SELECT t.state::text AS state, t.attempt, t.agentless,
       coalesce((SELECT j.executor_kind::text = 'http' FROM ax.job j WHERE j.id = t.job_id), t.agentless)::boolean AS http,
       t.not_before,
       coalesce(coalesce(t.started_at, t.leased_at) + make_interval(secs => t.timeout_seconds), now())::timestamptz AS deadline,
       t.execution_id, t.timeout_seconds, t.priority,
       coalesce((SELECT greatest(0, (1 - least(c.burst, c.tokens + c.rate * greatest(0, extract(epoch FROM now() - c.refilled_at))))
                                    / c.rate)
                 FROM ax.rate_class c WHERE c.name = t.rate_class), 0)::double precision AS token_wait_seconds,
       now()::timestamptz AS now
FROM ax.all_tasks t
WHERE t.id = @id;

-- TaskCheckToken says whether a task is an HTTP task (sent by ax serve or
-- by an agent) and whether token is its current completion token (its
-- lease token): the check before a posted result's body is read. A
-- primary-key read of the tasks in flight; history (a task that ended:
-- its token is stale) is read only when that finds nothing.
-- name: TaskCheckToken :one
(SELECT (t.agentless OR j.executor_kind::text = 'http')::boolean AS http,
        coalesce(t.lease_token = @token::uuid, false)::boolean AS current
 FROM ax.task t
 JOIN ax.job j ON j.id = t.job_id
 WHERE t.id = @id)
UNION ALL
(SELECT (h.agentless OR coalesce(j.executor_kind::text = 'http', false))::boolean, false
 FROM ax.task_history h
 LEFT JOIN ax.job j ON j.id = h.job_id
 WHERE h.id = @id)
LIMIT 1;

-- TaskAwaitTarget hands HTTP tasks whose target answered 202 from agent
-- @agent_id to their targets: the agent's lease token stays current (it
-- is the completion token the request carried), the task stays running
-- but no agent holds it (it counts for none, and no heartbeat renews it),
-- and its lease lasts to its deadline plus @grace_seconds, so that the
-- reaper times it out (and retries it) unless the target posts its result
-- first, as for a 202 to ax serve. Tasks of other kinds, and leases the
-- agent no longer holds, match nothing. Returns the tasks handed over.
-- name: TaskAwaitTarget :many
WITH locked AS (
    -- In id order (see TaskRenew), with the lease as it is: the row gives
    -- up its agent, so the lease is written down as its event below.
    SELECT t.id, t.lease_event_id, t.leased_at, t.preferred_agent_id, t.worker_host, t.worker_ip
    FROM ax.task t
    WHERE t.id = ANY(@task_ids::uuid[]) AND t.lease_token = ANY(@tokens::uuid[]) AND t.agent_id = @agent_id
    ORDER BY t.id
    FOR UPDATE
), accepted AS (
    UPDATE ax.task t
    SET agent_id = NULL, state = 'running', started_at = coalesce(t.started_at, t.leased_at),
        lease_expires_at = coalesce(t.started_at, t.leased_at)
                           + make_interval(secs => t.timeout_seconds + sqlc.arg('grace_seconds')::double precision),
        updated_at = now(), lease_event_id = NULL, worker_host = NULL, worker_ip = NULL
    FROM (SELECT unnest(@task_ids::uuid[]) AS id, unnest(@tokens::uuid[]) AS token) a, ax.job j
    WHERE t.id = ANY(@task_ids::uuid[]) AND t.id = a.id AND t.lease_token = a.token AND t.agent_id = @agent_id
      AND t.state IN ('leased', 'running') AND j.id = t.job_id AND j.executor_kind::text = 'http'
      AND (SELECT count(*) FROM locked) >= 0
    RETURNING t.id, t.execution_id, t.shard_index, t.attempt, t.timeout_seconds
), events AS (
    INSERT INTO ax.task_event (id, task_id, execution_id, shard_index, attempt, kind, state, agent_id, message,
                               worker_host, worker_ip, at)
    SELECT k.lease_event_id, a.id, a.execution_id, a.shard_index, a.attempt, 'state'::ax.task_event_kind,
           'leased'::ax.task_state, @agent_id,
           ax.lease_message(k.preferred_agent_id, @agent_id), k.worker_host, k.worker_ip, k.leased_at
    FROM accepted a
    JOIN locked k ON k.id = a.id
    WHERE k.lease_event_id IS NOT NULL
    UNION ALL
    SELECT nextval('ax.task_event_id_seq'), a.id, a.execution_id, a.shard_index, a.attempt,
           'state'::ax.task_event_kind, 'running'::ax.task_state, @agent_id, 'accepted by its target (202): its result is awaited at the completion URL',
           nullif(w.host_name, ''), w.host_ip, clock_timestamp()
    FROM accepted a
    LEFT JOIN ax.agent w ON w.id = @agent_id
)
SELECT id, execution_id FROM accepted;

-- TaskGetPriorities returns the priorities of new agentless tasks, which
-- order their River jobs.
-- name: TaskGetPriorities :many
SELECT id, priority FROM ax.task WHERE id = ANY(@ids::uuid[]);

-- TaskCancelAgentless ends agentless tasks whose execution was
-- cancelled while they ran, and agents' HTTP tasks awaiting their target
-- after a 202 (TaskAwaitTarget; no agent holds them), since no agent will
-- report them, and returns their executions, to be finalized. Read
-- through task_agentless_cancel_idx and task_agent_idx (agent_id null).
-- name: TaskCancelAgentless :many
WITH done AS (
    UPDATE ax.task t
    SET state = 'cancelled', finished_at = now(), lease_token = NULL, lease_expires_at = NULL,
        error = 'cancelled while its request was outstanding', error_code = NULL, updated_at = now()
    WHERE t.id IN (SELECT x.id FROM ax.task x
                   WHERE x.agentless AND x.state IN ('leased', 'running') AND x.cancel_requested_at IS NOT NULL
                   UNION ALL
                   SELECT x.id FROM ax.task x
                   WHERE x.agent_id IS NULL AND NOT x.agentless AND x.state IN ('leased', 'running')
                     AND x.cancel_requested_at IS NOT NULL)
      AND t.state IN ('leased', 'running') AND t.cancel_requested_at IS NOT NULL
    RETURNING t.id, t.execution_id, t.shard_index, t.attempt
), events AS (
    INSERT INTO ax.task_event (task_id, execution_id, shard_index, attempt, kind, state, message)
    SELECT id, execution_id, shard_index, attempt, 'state', 'cancelled', 'cancelled while its request was outstanding'
    FROM done
)
SELECT DISTINCT execution_id FROM done;

-- TaskGetHTTPTarget is the job and URL of a task, for the slot its request
-- will hold.
-- name: TaskGetHTTPTarget :one
SELECT t.job_id, coalesce(j.executor->>'url', '')::text AS url
FROM ax.task t
JOIN ax.job j ON j.id = t.job_id
WHERE t.id = @id;

-- TaskNoAgentUnpark unparks the tasks of jobs a live agent can take again
-- (TaskInsertPlanned parked them: no candidate when they were written).
-- It looks at up to @max_jobs jobs with parked tasks, in id order after
-- @after (a skip scan of task_no_agent_idx, one probe a job), and
-- unparks at most @max_tasks tasks of those a candidate serves: active
-- or quarantined, heard from within @live_seconds, labels including the
-- job's, accepting its executor kind, and not label-bound for an
-- untargeted job (the router's candidates, and TaskLeasePick's rules).
-- The caller goes on after last_job next time, or from the start when
-- jobs < @max_jobs; it stays put when unparked = @max_tasks. Row locks
-- are skipped: a task being cancelled is not waited for.
-- name: TaskNoAgentUnpark :one
WITH RECURSIVE parked(job_id) AS (
    (SELECT t.job_id FROM ax.task t
     WHERE t.no_agent AND t.state = 'pending' AND t.job_id > @after::uuid
     ORDER BY t.job_id LIMIT 1)
    UNION ALL
    SELECT (SELECT t.job_id FROM ax.task t
            WHERE t.no_agent AND t.state = 'pending' AND t.job_id > p.job_id
            ORDER BY t.job_id LIMIT 1)
    FROM parked p
    WHERE p.job_id IS NOT NULL
), checked AS MATERIALIZED (
    SELECT job_id FROM parked WHERE job_id IS NOT NULL LIMIT @max_jobs::integer
), served AS (
    SELECT c.job_id
    FROM checked c
    JOIN ax.job j ON j.id = c.job_id
    WHERE EXISTS (SELECT 1 FROM ax.agent a
                  WHERE a.state IN ('active', 'quarantined')
                    AND a.last_heartbeat_at > coalesce(sqlc.narg('now')::timestamptz, now())
                                              - make_interval(secs => sqlc.arg('live_seconds')::double precision)
                    AND j.target_labels <@ a.labels
                    AND j.executor_kind::text = ANY(a.executors)
                    AND (NOT a.label_bound OR j.target_labels <> '{}'::jsonb))
), unparked AS (
    UPDATE ax.task t SET no_agent = false
    WHERE t.id IN (SELECT u.id FROM ax.task u
                   WHERE u.job_id IN (SELECT job_id FROM served) AND u.no_agent AND u.state = 'pending'
                   LIMIT @max_tasks::integer
                   FOR UPDATE SKIP LOCKED)
    RETURNING t.id
)
SELECT (SELECT count(*) FROM checked)::integer AS jobs,
       coalesce((SELECT c.job_id FROM checked c ORDER BY c.job_id DESC LIMIT 1), '00000000-0000-0000-0000-000000000000')::uuid AS last_job,
       (SELECT count(*) FROM unparked)::integer AS unparked;

-- TaskFailPinnedOfOffline fails the pending tasks pinned to agents that
-- went offline or are no more (a broadcast run's share of an agent gone
-- before it leased it, or of one that deregistered). No other agent may take such a task,
-- so it waited for good and its run never ended (a job forbidding overlap
-- never fired again). The agents are found by a skip scan of
-- task_pinned_pending_idx, one probe an agent with pinned tasks waiting
-- (and one of ax.agent), so a sweep reads no other task; at most @max
-- tasks a call. Runs being completed right now are skipped, their tasks
-- failed by a later call. Returns the runs of the tasks failed, for
-- ExecutionFinalize.
-- name: TaskFailPinnedOfOffline :many
WITH RECURSIVE pinned_to(agent_id) AS (
    (SELECT t.preferred_agent_id FROM ax.task t
     WHERE t.pinned AND t.state = 'pending'
     ORDER BY t.preferred_agent_id LIMIT 1)
    UNION ALL
    SELECT (SELECT t.preferred_agent_id FROM ax.task t
            WHERE t.pinned AND t.state = 'pending' AND t.preferred_agent_id > p.agent_id
            ORDER BY t.preferred_agent_id LIMIT 1)
    FROM pinned_to p
    WHERE p.agent_id IS NOT NULL
), gone AS (
    -- Offline, or no agent at all: the cleanup deletes agents offline
    -- past the history horizon (AgentPruneGone), and a re-run of a
    -- broadcast shard pins it to its agent again (TaskPlanForRerun).
    SELECT p.agent_id AS id
    FROM pinned_to p
    LEFT JOIN ax.agent a ON a.id = p.agent_id
    WHERE p.agent_id IS NOT NULL AND (a.id IS NULL OR a.state = 'offline')
), orphaned AS (
    SELECT t.id, t.execution_id
    FROM ax.task t
    WHERE t.pinned AND t.state = 'pending' AND t.preferred_agent_id IN (SELECT id FROM gone)
    LIMIT @max::integer
    FOR UPDATE OF t SKIP LOCKED
), locked AS (
    SELECT e.id
    FROM ax.execution e
    WHERE e.id IN (SELECT execution_id FROM orphaned)
    ORDER BY e.id
    FOR UPDATE SKIP LOCKED
), failed AS (
    UPDATE ax.task t
    SET state = 'failed',
        error = 'its agent went offline before running it (pinned to that agent: no other may take it)',
        error_code = 'agent_offline', finished_at = coalesce(sqlc.narg('now')::timestamptz, now()), updated_at = now()
    FROM orphaned o
    WHERE t.id = o.id AND t.execution_id IN (SELECT id FROM locked)
    RETURNING t.id, t.execution_id, t.shard_index, t.attempt, t.error, t.error_code
), events AS (
    INSERT INTO ax.task_event (id, task_id, execution_id, shard_index, attempt, kind, state, agent_id, message,
                               error_code, at)
    -- No agent_id: the agent did not run the task, and its health
    -- (ax.agent_outcomes) must not count this failure as its own.
    SELECT nextval('ax.task_event_id_seq'), f.id, f.execution_id, f.shard_index, f.attempt, 'state'::ax.task_event_kind,
           'failed'::ax.task_state, NULL::uuid, f.error, f.error_code, clock_timestamp()
    FROM failed f
)
SELECT DISTINCT execution_id FROM failed;

-- TaskPoolCatchUp moves the unfinished tasks of jobs whose pool changed in
-- the last @window_seconds (ax.job_pool_change, migration 00082) to their
-- job's pool now, and forgets older changes: a fire that read the job's
-- pool before the change and committed after it wrote its tasks in the
-- old pool, where no agent that may take them looks. At most 100 jobs a
-- call, those due first. A job is read at once and then at intervals that
-- double from its change (next_at, migration 00089), not every call:
-- each pass reads all its unfinished tasks, and most such fires commit
-- within a second of the change. Its last pass comes after the window.
-- Pinned tasks stay where they were written (their agent matched that
-- pool). Returns the tasks moved.
-- name: TaskPoolCatchUp :one
WITH changed AS MATERIALIZED (
    SELECT c.job_id, c.changed_at FROM ax.job_pool_change c WHERE c.next_at <= now() ORDER BY c.next_at LIMIT 100
), moved AS MATERIALIZED (
    -- Pools looked up per rate class, not per task (ax.job_pool_follow,
    -- migration 00085).
    SELECT ax.job_pool_follow(j) AS n
    FROM changed c
    JOIN ax.job j ON j.id = c.job_id
), forgotten AS (
    DELETE FROM ax.job_pool_change c
    USING changed d
    WHERE c.job_id = d.job_id AND c.changed_at = d.changed_at
      AND d.changed_at < now() - make_interval(secs => @window_seconds::double precision)
), later AS (
    UPDATE ax.job_pool_change c SET next_at = now() + greatest(interval '1 second', now() - c.changed_at)
    FROM changed d
    WHERE c.job_id = d.job_id AND c.changed_at = d.changed_at
      AND d.changed_at >= now() - make_interval(secs => @window_seconds::double precision)
)
SELECT coalesce(sum(n), 0)::integer FROM moved;
