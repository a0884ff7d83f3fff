-- UpcomingFireLock takes the lock that lets one replica at a time replace
-- the upcoming fires (the others skip their pass); it ends with the
-- transaction.
-- name: UpcomingFireLock :one
SELECT pg_try_advisory_xact_lock(hashtext('ax.upcoming_fire'))::boolean AS locked;

-- UpcomingFireSources lists the unpaused cron and interval jobs that fire
-- before @until, with what computing their ticks needs (through
-- trigger_due_idx: jobs due later are not read), oldest job first: when a
-- pass's cap cuts the list, the same jobs are left out from one pass to
-- the next, and a pass rewrites nothing that did not change.
-- name: UpcomingFireSources :many
SELECT j.id, j.trigger_kind, j.cron_expr, j.timezone, j.interval_seconds, j.triggers, t.next_fire_at::timestamptz AS next_fire_at,
       j.active_from, j.active_until, j.exclude
FROM ax.trigger t
JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at IS NOT NULL AND t.set_aside_at IS NULL AND t.next_fire_at <= @until::timestamptz
  AND NOT t.paused AND j.trigger_kind IN ('cron', 'interval')
ORDER BY j.created_at, j.id;

-- UpcomingFireFresh says whether a replica listed the upcoming fires
-- less than @fresh_ms ago.
-- name: UpcomingFireFresh :one
SELECT coalesce(max(computed_at) > now() - make_interval(secs => sqlc.arg('fresh_ms')::bigint / 1000.0), false)::boolean AS fresh
FROM ax.upcoming_fire_pass;

-- UpcomingFireSync makes ax.upcoming_fire hold exactly the given ticks
-- (@job_ids[i] fires at @fire_ats[i]) by deleting the ticks not given and
-- inserting the ones missing: from one pass to the next, most ticks of
-- the hour are the same and are left alone. It notes the pass's time.
-- name: UpcomingFireSync :one
WITH wanted AS (
    SELECT unnest(@job_ids::uuid[]) AS job_id, unnest(@fire_ats::timestamptz[]) AS fire_at
), gone AS (
    DELETE FROM ax.upcoming_fire u
    WHERE NOT EXISTS (SELECT 1 FROM wanted w WHERE w.job_id = u.job_id AND w.fire_at = u.fire_at)
    RETURNING 1
), added AS (
    INSERT INTO ax.upcoming_fire (job_id, fire_at)
    SELECT w.job_id, w.fire_at FROM wanted w
    WHERE NOT EXISTS (SELECT 1 FROM ax.upcoming_fire u WHERE u.job_id = w.job_id AND u.fire_at = w.fire_at)
    ON CONFLICT DO NOTHING
    RETURNING 1
), noted AS (
    INSERT INTO ax.upcoming_fire_pass (computed_at) VALUES (now())
    ON CONFLICT (singleton) DO UPDATE SET computed_at = excluded.computed_at
)
SELECT (SELECT count(*) FROM gone)::bigint AS deleted, (SELECT count(*) FROM added)::bigint AS inserted;
