-- +goose Up

-- TaskLeasePick's starved, unassigned and stealable groups read each of
-- the agents' pools apart, each up to the lease's max, FOR UPDATE SKIP
-- LOCKED, and only then merge the pools: with P pools holding tasks of a
-- group, a lease locked up to P times what it could take (each lock a
-- write to the task's page and to the WAL, and the rows skipped by every
-- other lease until this one commits). This counts, for one group, how
-- many of the group's first p_room tasks (all of p_pools together, in the
-- group's order) each pool holds, read without locks, so that each
-- pool's locking read takes its share. The lease passes the pools whose
-- first waiting task says they may have tasks of the group; this probes
-- each for one (the group's index), and with fewer than two such pools
-- returns nothing: the lease then reads as before, nothing twice.
-- The rules are TaskLeasePick's (sql/queries/task.sql), group by group:
-- keep them in step. In a function, not in the statement: written out
-- there, the three counts' plans made the start-up of every lease's
-- executor about twice as dear (its bind: 0.27 ms, not 0.14, for a lease
-- of nothing), though most leases never run them; called, 0.19-0.20 ms.
-- +goose StatementBegin
CREATE FUNCTION ax.lease_pool_shares(p_group text, p_pools integer[], p_room integer,
                                     p_labels jsonb, p_executors text[], p_label_bound boolean, p_classes text[],
                                     p_agents uuid[], p_taken uuid[], p_own uuid[], p_now timestamptz,
                                     p_starve_seconds double precision, p_steal_seconds double precision,
                                     p_steal_any_seconds double precision)
    RETURNS TABLE (share_pool integer, share integer)
    LANGUAGE plpgsql STABLE ROWS 4 AS $$
DECLARE
    busy integer[];
BEGIN
    IF p_room <= 0 OR coalesce(cardinality(p_pools), 0) < 2 THEN
        RETURN;
    END IF;
    IF p_group = 'starved' THEN
        busy := ARRAY(SELECT p.id
                      FROM unnest(p_pools) AS p(id)
                      CROSS JOIN LATERAL (SELECT 1 FROM ax.task t
                                          WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned
                                            AND t.not_before <= p_now - make_interval(secs => p_starve_seconds)
                                          ORDER BY t.not_before
                                          LIMIT 1) f);
        IF cardinality(busy) > 1 THEN
            RETURN QUERY
            SELECT x.pool_id, count(*)::integer
            FROM (SELECT u.pool_id
                  FROM unnest(busy) AS p(id)
                  CROSS JOIN LATERAL (
                      SELECT t.pool_id, t.not_before
                      FROM ax.task t
                      JOIN ax.job j ON j.id = t.job_id
                      WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.agentless AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned AND t.id <> ALL(p_taken)
                        AND t.not_before <= p_now - make_interval(secs => p_starve_seconds)
                        AND j.target_labels <@ p_labels
                        AND j.executor_kind::text = ANY(p_executors)
                        AND (NOT p_label_bound OR j.target_labels <> '{}'::jsonb)
                        AND (t.preferred_agent_id IS NULL OR t.preferred_agent_id = ANY(p_agents)
                             OR (NOT t.pinned
                                 AND t.not_before <= p_now - make_interval(secs => p_steal_seconds)
                                 AND (t.fallback_agent_id IS NULL OR t.fallback_agent_id = ANY(p_agents)
                                      OR t.not_before <= p_now - make_interval(secs => p_steal_any_seconds))))
                        AND (t.rate_class IS NULL OR (t.rate_class = ANY(p_classes) AND NOT EXISTS (
                            SELECT 1 FROM ax.rate_class c
                            WHERE c.name = t.rate_class
                              AND t.priority < coalesce(c.manual_min_priority,
                                                        CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
                      ORDER BY t.not_before
                      LIMIT p_room) u
                  ORDER BY u.not_before
                  LIMIT p_room) x
            GROUP BY x.pool_id;
        END IF;
    ELSIF p_group = 'unassigned' THEN
        busy := ARRAY(SELECT p.id
                      FROM unnest(p_pools) AS p(id)
                      CROSS JOIN LATERAL (SELECT 1 FROM ax.task t
                                          WHERE t.pool_id = p.id AND t.state = 'pending' AND t.preferred_agent_id IS NULL AND NOT t.agentless
                                            AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.floor_held
                                          ORDER BY t.priority DESC, t.created_at
                                          LIMIT 1) f);
        IF cardinality(busy) > 1 THEN
            RETURN QUERY
            SELECT x.pool_id, count(*)::integer
            FROM (SELECT u.pool_id
                  FROM unnest(busy) AS p(id)
                  CROSS JOIN LATERAL (
                      SELECT t.pool_id, t.priority, t.created_at
                      FROM ax.task t
                      JOIN ax.job j ON j.id = t.job_id
                      WHERE t.pool_id = p.id AND t.state = 'pending' AND t.preferred_agent_id IS NULL AND NOT t.agentless AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.floor_held AND t.id <> ALL(p_taken) AND t.not_before <= p_now
                        AND j.target_labels <@ p_labels
                        AND j.executor_kind::text = ANY(p_executors)
                        AND (NOT p_label_bound OR j.target_labels <> '{}'::jsonb)
                        AND (t.rate_class IS NULL OR (t.rate_class = ANY(p_classes) AND NOT EXISTS (
                            SELECT 1 FROM ax.rate_class c
                            WHERE c.name = t.rate_class
                              AND t.priority < coalesce(c.manual_min_priority,
                                                        CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
                      ORDER BY t.priority DESC, t.created_at
                      LIMIT p_room) u
                  ORDER BY u.priority DESC, u.created_at
                  LIMIT p_room) x
            GROUP BY x.pool_id;
        END IF;
    ELSIF p_group = 'stealable' THEN
        busy := ARRAY(SELECT p.id
                      FROM unnest(p_pools) AS p(id)
                      CROSS JOIN LATERAL (SELECT 1 FROM ax.task t
                                          WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND NOT t.pinned
                                            AND t.preferred_agent_id IS NOT NULL AND t.concurrency_key IS NULL
                                            AND t.not_before <= p_now - make_interval(secs => p_steal_seconds)
                                          ORDER BY t.not_before
                                          LIMIT 1) f);
        IF cardinality(busy) > 1 THEN
            RETURN QUERY
            SELECT x.pool_id, count(*)::integer
            FROM (SELECT u.pool_id
                  FROM unnest(busy) AS p(id)
                  CROSS JOIN LATERAL (
                      SELECT t.pool_id, t.not_before
                      FROM ax.task t
                      JOIN ax.job j ON j.id = t.job_id
                      WHERE t.pool_id = p.id AND t.state = 'pending' AND NOT t.pinned AND t.preferred_agent_id IS NOT NULL AND t.concurrency_key IS NULL AND NOT t.no_agent AND NOT t.key_parked AND NOT t.floor_held AND t.id <> ALL(p_taken)
                        AND t.not_before <= p_now - make_interval(secs => p_steal_seconds)
                        AND t.id <> ALL(p_own)
                        AND (t.fallback_agent_id IS NULL OR t.fallback_agent_id = ANY(p_agents)
                             OR t.not_before <= p_now - make_interval(secs => p_steal_any_seconds))
                        AND j.target_labels <@ p_labels
                        AND j.executor_kind::text = ANY(p_executors)
                        AND (NOT p_label_bound OR j.target_labels <> '{}'::jsonb)
                        AND (t.rate_class IS NULL OR (t.rate_class = ANY(p_classes) AND NOT EXISTS (
                            SELECT 1 FROM ax.rate_class c
                            WHERE c.name = t.rate_class
                              AND t.priority < coalesce(c.manual_min_priority,
                                                        CASE WHEN c.degraded_since IS NOT NULL THEN c.auto_min_priority END))))
                      ORDER BY t.not_before
                      LIMIT p_room) u
                  ORDER BY u.not_before
                  LIMIT p_room) x
            GROUP BY x.pool_id;
        END IF;
    END IF;
END $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION ax.lease_pool_shares(text, integer[], integer, jsonb, text[], boolean, text[], uuid[], uuid[], uuid[],
                                   timestamptz, double precision, double precision, double precision);
