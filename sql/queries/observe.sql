-- Queries behind the Prometheus collectors: each scrape reads the state
-- that every replica shares, so all replicas report the same numbers.

-- ObserveBacklog counts ready pending tasks per rate class and priority,
-- with the oldest wait of each (read through task_pending_idx).
-- name: ObserveBacklog :many
SELECT coalesce(rate_class, '')::text AS class, priority,
       count(*)::bigint AS depth,
       coalesce(extract(epoch FROM clock_timestamp() - min(not_before)), 0)::double precision AS oldest_seconds
FROM ax.task
WHERE state = 'pending' AND not_before <= now()
GROUP BY 1, 2;

-- ObserveAgents counts agents by state, readiness and pool label.
-- name: ObserveAgents :many
SELECT state::text AS state, ready, coalesce(labels ->> 'pool', '')::text AS pool, count(*)::bigint AS agents
FROM ax.agent
WHERE state <> 'offline' OR last_heartbeat_at > now() - interval '1 day'
GROUP BY 1, 2, 3;

-- ObservePools lists the pools jobs target, so a pool with no ready agent
-- shows as zero rather than missing.
-- name: ObservePools :many
SELECT DISTINCT coalesce(target_labels ->> 'pool', '')::text AS pool FROM ax.job;

-- ObserveFailingJobs reports jobs with failed runs in the last
-- @window_seconds: their failure ratio there and how many of their latest
-- runs in a row failed (up to 20 looked at).
-- name: ObserveFailingJobs :many
SELECT j.name, j.group_name, j.owner,
       r.finished::bigint AS finished, r.failed::bigint AS failed,
       (SELECT count(*) FROM (
            SELECT e.state, bool_and(e.state IN ('failed', 'timed_out')) OVER (ORDER BY e.finished_at DESC) AS streak
            FROM ax.execution e
            WHERE e.job_id = j.id AND e.finished_at IS NOT NULL
            ORDER BY e.finished_at DESC LIMIT 20) s
        WHERE s.streak)::bigint AS consecutive_failures
FROM ax.job j
JOIN LATERAL (
    SELECT count(*) AS finished, count(*) FILTER (WHERE e.state IN ('failed', 'timed_out')) AS failed
    FROM ax.execution e
    WHERE e.job_id = j.id AND e.finished_at > now() - make_interval(secs => sqlc.arg('window_seconds')::double precision)
) r ON r.failed > 0;

-- ObserveOverdue reports unpaused triggers that should have fired (set
-- aside ones are not expected to, and are counted apart): how many are
-- late by more than @late_seconds, and the latest of them; and how many
-- jobs the trigger loop set aside.
-- name: ObserveOverdue :one
SELECT count(*) FILTER (WHERE next_fire_at < now() - make_interval(secs => sqlc.arg('late_seconds')::double precision))::bigint AS overdue,
       coalesce(extract(epoch FROM now() - min(next_fire_at)), 0)::double precision AS max_overdue_seconds,
       (SELECT count(*) FROM ax.trigger WHERE set_aside_at IS NOT NULL)::bigint AS set_aside
FROM ax.trigger
WHERE NOT paused AND set_aside_at IS NULL AND next_fire_at <= now();

-- ObserveBreakers lists callback hosts whose circuit breaker is not
-- closed, or changed within a day (so a closed one reads 0, not gone).
-- name: ObserveBreakers :many
SELECT host, state::text AS state
FROM ax.callback_breaker
WHERE state <> 'closed' OR updated_at > now() - interval '1 day';
