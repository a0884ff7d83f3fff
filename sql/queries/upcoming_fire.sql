-- UpcomingFireLock takes the lock that lets one replica at a time replace
-- the upcoming fires (the others skip their pass); it ends with the
-- transaction.
-- name: UpcomingFireLock :one
SELECT pg_try_advisory_xact_lock(hashtext('ax.upcoming_fire'))::boolean AS locked;

-- UpcomingFireSources lists the unpaused cron and interval jobs that fire
-- before @until, with what computing their ticks needs (through
-- trigger_due_idx: jobs due later are not read).
-- name: UpcomingFireSources :many
SELECT j.id, j.trigger_kind, j.cron_expr, j.timezone, j.interval_seconds, t.next_fire_at::timestamptz AS next_fire_at
FROM ax.trigger t
JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at IS NOT NULL AND t.set_aside_at IS NULL AND t.next_fire_at <= @until::timestamptz
  AND NOT t.paused AND j.trigger_kind IN ('cron', 'interval');

-- UpcomingFireFresh says whether a replica listed the upcoming fires
-- less than @fresh_ms ago.
-- name: UpcomingFireFresh :one
SELECT coalesce(max(computed_at) > now() - make_interval(secs => sqlc.arg('fresh_ms')::bigint / 1000.0), false)::boolean AS fresh
FROM ax.upcoming_fire;

-- name: UpcomingFireClear :exec
DELETE FROM ax.upcoming_fire;

-- name: UpcomingFireInsertMany :exec
INSERT INTO ax.upcoming_fire (job_id, fire_at)
SELECT unnest(@job_ids::uuid[]), unnest(@fire_ats::timestamptz[])
ON CONFLICT DO NOTHING;
