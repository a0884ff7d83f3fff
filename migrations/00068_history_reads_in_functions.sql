-- +goose Up

-- The reads of migration 00067 that cross the history partitions run in
-- PL/pgSQL functions, whose statements are planned once per session and
-- only when called. Inlined into the statements that use them (a fire's
-- TaskPlanForExecutions, the reaper's health checks), each execution
-- planned a scan of every partition of ax.task_history (34 with the
-- default settings): the view's read of a run's durations added about
-- 10 ms of planning to every fire statement, adaptive jobs or not, and
-- BenchmarkDelayedRuns' fires came up to 49 ms late.

-- ax.agent_outcomes and ax.agent_leases as in 00067, in PL/pgSQL.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.agent_outcomes(p_agent uuid, p_since timestamptz, p_states ax.task_state[], p_limit integer)
RETURNS TABLE (at timestamptz, state ax.task_state, error_code text, duration_ms bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT o.at, o.state, o.error_code, o.duration_ms
    FROM ((SELECT e.at, e.state, e.error_code, e.duration_ms
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = ANY(p_states) AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task_history t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.finished_at IS NOT NULL AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit;
END $$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.agent_leases(p_agent uuid, p_since timestamptz, p_limit integer)
RETURNS TABLE (at timestamptz, routed boolean)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT o.at, o.routed
    FROM ((SELECT e.at, e.message IN ('routed here', 'unassigned') AS routed
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = 'leased' AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task_history t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at > p_since
             AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at IS NOT NULL
             AND t.finished_at > p_since AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.state IN ('leased', 'running') AND t.lease_event_id IS NOT NULL
             AND t.leased_at > p_since
           ORDER BY t.leased_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit;
END $$;
-- +goose StatementEnd

-- ax.job_success_p95 measures job p_job's latest successes within 24 h,
-- at most 100 (each history partition's (job_id, finished_at) index),
-- from lease to result: the success's end on its task's row (found in
-- the one partition its run's retain_until names), or its event (before
-- migration 00067). TaskPlanForExecutions calls it for the adaptive jobs
-- it measures.
-- +goose StatementBegin
CREATE FUNCTION ax.job_success_p95(p_job uuid) RETURNS TABLE (samples integer, p95_ms bigint)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN QUERY
    SELECT count(*)::integer, (percentile_disc(0.95) WITHIN GROUP (ORDER BY d.ms))::bigint
    FROM (
        SELECT s.ms
        FROM (SELECT e.id, e.retain_until
              FROM ax.execution_history e
              WHERE e.job_id = p_job AND e.state = 'succeeded' AND e.finished_at > now() - interval '24 hours'
              ORDER BY e.finished_at DESC
              LIMIT 100) r
        CROSS JOIN LATERAL (
            (SELECT (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint AS ms, t.finished_at AS at
             FROM ax.task_history t
             WHERE t.execution_id = r.id AND t.retain_until = r.retain_until AND t.end_event_id IS NOT NULL
             LIMIT 100)
            UNION ALL
            (SELECT ev.duration_ms, ev.at
             FROM ax.task_event ev
             WHERE ev.execution_id = r.id AND ev.kind = 'state' AND ev.state = 'succeeded'
               AND ev.duration_ms IS NOT NULL
             LIMIT 100)) s
        ORDER BY s.at DESC
        LIMIT 100
    ) d;
END $$;
-- +goose StatementEnd

-- +goose Down

DROP FUNCTION ax.job_success_p95(uuid);
-- ax.agent_outcomes and ax.agent_leases as in 00067.
CREATE OR REPLACE FUNCTION ax.agent_outcomes(p_agent uuid, p_since timestamptz, p_states ax.task_state[], p_limit integer)
RETURNS TABLE (at timestamptz, state ax.task_state, error_code text, duration_ms bigint)
LANGUAGE sql STABLE AS $$
    SELECT o.at, o.state, o.error_code, o.duration_ms
    FROM ((SELECT e.at, e.state, e.error_code, e.duration_ms
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = ANY(p_states) AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task_history t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.finished_at, 'succeeded'::ax.task_state, t.error_code,
                  (extract(epoch FROM t.finished_at - t.leased_at) * 1000)::bigint
           FROM ax.task t
           WHERE 'succeeded' = ANY(p_states) AND t.agent_id = p_agent AND t.lease_event_id IS NOT NULL
             AND t.finished_at IS NOT NULL AND t.end_event_id IS NOT NULL AND t.finished_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit
$$;

CREATE OR REPLACE FUNCTION ax.agent_leases(p_agent uuid, p_since timestamptz, p_limit integer)
RETURNS TABLE (at timestamptz, routed boolean)
LANGUAGE sql STABLE AS $$
    SELECT o.at, o.routed
    FROM ((SELECT e.at, e.message IN ('routed here', 'unassigned') AS routed
           FROM ax.task_event e
           WHERE e.agent_id = p_agent AND e.kind = 'state' AND e.state = 'leased' AND e.at > p_since
           ORDER BY e.at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task_history t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at > p_since
             AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.lease_event_id IS NOT NULL AND t.finished_at IS NOT NULL
             AND t.finished_at > p_since AND t.leased_at > p_since
           ORDER BY t.finished_at DESC
           LIMIT p_limit)
          UNION ALL
          (SELECT t.leased_at, t.preferred_agent_id IS NULL OR t.preferred_agent_id = t.agent_id
           FROM ax.task t
           WHERE t.agent_id = p_agent AND t.state IN ('leased', 'running') AND t.lease_event_id IS NOT NULL
             AND t.leased_at > p_since
           ORDER BY t.leased_at DESC
           LIMIT p_limit)) o
    ORDER BY o.at DESC
    LIMIT p_limit
$$;
