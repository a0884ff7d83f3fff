-- The console's home page draws these: each reads a bounded window (the
-- last 24 hours, found through the runs' ids, which are UUIDv7 made when
-- the run is made, so the primary key and the history partitions' id
-- indexes bound the scan) or the pending tasks' partial index, and
-- aggregates in the database, so a page costs the same with a million
-- runs as with a thousand. @groups limits each to a key's job groups
-- (NULL: all). @now steers the window in tests (NULL: now()).

-- OverviewRunsPerMinute counts the runs fired in the last 24 hours by
-- minute and state. A delayed run asked for more than a day ahead has an
-- id older than the window and is not counted.
-- name: OverviewRunsPerMinute :many
SELECT date_bin('1 minute', e.fired_at, timestamptz '2000-01-01')::timestamptz AS minute,
       e.state::text AS state, count(*)::bigint AS runs
FROM ax.all_executions e
WHERE e.id >= ax.uuid_v7_floor(coalesce(sqlc.narg('now')::timestamptz, now()) - interval '24 hours')
  AND e.fired_at >= coalesce(sqlc.narg('now')::timestamptz, now()) - interval '24 hours'
  AND e.fired_at < coalesce(sqlc.narg('now')::timestamptz, now())
  AND (sqlc.narg('groups')::text[] IS NULL
       OR e.job_id IN (SELECT j.id FROM ax.job j WHERE j.group_name = ANY(sqlc.narg('groups')::text[])))
GROUP BY 1, 2
ORDER BY 1, 2;

-- OverviewDurations is the median and 95th percentile of how long the
-- runs that finished in the last 24 hours took (started to finished),
-- by job and hour, for the @max_jobs jobs that ran most.
-- name: OverviewDurations :many
WITH took AS (
    SELECT e.job_id, date_bin('1 hour', e.finished_at, timestamptz '2000-01-01')::timestamptz AS hour,
           e.finished_at - e.started_at AS took
    FROM ax.all_executions e
    WHERE e.id >= ax.uuid_v7_floor(coalesce(sqlc.narg('now')::timestamptz, now()) - interval '24 hours')
      AND e.finished_at >= coalesce(sqlc.narg('now')::timestamptz, now()) - interval '24 hours'
      AND e.finished_at < coalesce(sqlc.narg('now')::timestamptz, now())
      AND e.started_at IS NOT NULL
      AND (sqlc.narg('groups')::text[] IS NULL
           OR e.job_id IN (SELECT j.id FROM ax.job j WHERE j.group_name = ANY(sqlc.narg('groups')::text[])))
), busiest AS (
    SELECT t.job_id FROM took t GROUP BY t.job_id ORDER BY count(*) DESC, t.job_id LIMIT @max_jobs
)
SELECT t.job_id, j.group_name, j.name, t.hour, count(*)::bigint AS runs,
       extract(epoch FROM percentile_disc(0.5) WITHIN GROUP (ORDER BY t.took))::float8 AS p50_seconds,
       extract(epoch FROM percentile_disc(0.95) WITHIN GROUP (ORDER BY t.took))::float8 AS p95_seconds
FROM took t
JOIN busiest b ON b.job_id = t.job_id
JOIN ax.job j ON j.id = t.job_id
GROUP BY t.job_id, j.group_name, j.name, t.hour
ORDER BY j.group_name, j.name, t.hour;

-- OverviewQueueDepth counts the pending tasks by rate class ('' for
-- none) and priority, the @max_rows largest groups; parked tasks (no
-- agent, or behind their key), pinned ones and tasks held below their
-- class's floor too, in parts of their own: each part is read through an
-- index (task_pending_age_idx holds none of them, task_no_agent_idx,
-- task_concurrency_parked_idx, task_pinned_pending_idx and
-- task_floor_held_idx each one kind; migrations 00076, 00084, 00086 and
-- 00087).
-- name: OverviewQueueDepth :many
SELECT coalesce(t.rate_class, '')::text AS rate_class, t.priority, count(*)::bigint AS tasks
FROM (SELECT p.rate_class, p.priority, p.job_id FROM ax.task p WHERE p.state = 'pending' AND NOT p.no_agent AND NOT p.key_parked AND NOT p.floor_held AND NOT p.pinned
      UNION ALL
      SELECT p.rate_class, p.priority, p.job_id FROM ax.task p WHERE p.state = 'pending' AND p.pinned AND NOT p.floor_held AND NOT p.key_parked AND NOT p.no_agent
      UNION ALL
      SELECT p.rate_class, p.priority, p.job_id FROM ax.task p WHERE p.state = 'pending' AND p.floor_held AND NOT p.key_parked AND NOT p.no_agent
      UNION ALL
      SELECT p.rate_class, p.priority, p.job_id FROM ax.task p WHERE p.state = 'pending' AND p.key_parked AND NOT p.no_agent
      UNION ALL
      SELECT p.rate_class, p.priority, p.job_id FROM ax.task p WHERE p.state = 'pending' AND p.no_agent) t
WHERE (sqlc.narg('groups')::text[] IS NULL
       OR t.job_id IN (SELECT j.id FROM ax.job j WHERE j.group_name = ANY(sqlc.narg('groups')::text[])))
GROUP BY 1, 2
ORDER BY 1, 2 DESC
LIMIT @max_rows;
