-- name: TriggerInsert :one
INSERT INTO ax.trigger (job_id, next_fire_at, paused, paused_at)
VALUES (@job_id, sqlc.narg('next_fire_at'), @paused,
        CASE WHEN @paused::boolean THEN now() END)
RETURNING *;

-- name: TriggerSetNextFire :one
UPDATE ax.trigger
SET next_fire_at = sqlc.narg('next_fire_at'), set_aside_at = NULL, set_aside_reason = NULL, updated_at = now()
WHERE job_id = @job_id
RETURNING *;

-- TriggerPause pauses a job through the API: the pause has no reason of
-- ax's own, so declaring the job again does not resume it.
-- name: TriggerPause :one
UPDATE ax.trigger
SET paused = true, paused_at = coalesce(paused_at, now()), paused_reason = NULL, updated_at = now()
WHERE job_id = @job_id
RETURNING *;

-- name: TriggerResume :one
UPDATE ax.trigger
SET paused = false, paused_at = NULL, paused_reason = NULL, set_aside_at = NULL, set_aside_reason = NULL, updated_at = now()
WHERE job_id = @job_id
RETURNING *;

-- TriggerPauseWithReason pauses a job for a reason of ax's own (it left
-- its declaration set). A job paused already is left as it is: its pause
-- is someone else's, which declaring the job again must not undo.
-- name: TriggerPauseWithReason :execrows
UPDATE ax.trigger
SET paused = true, paused_at = now(), paused_reason = @reason, updated_at = now()
WHERE job_id = @job_id AND NOT paused;

-- TriggerClaimDue locks up to @max not set-aside trigger rows due by now plus
-- @ahead_ms (skipping rows other replicas hold) with what planning their
-- fires needs; paused ones once their tick has passed (not ahead), so it
-- is recorded as skipped as it passes. Read through trigger_due_idx: cost
-- grows with the due rows, not all jobs.
-- name: TriggerClaimDue :many
SELECT j.id, j.trigger_kind, j.cron_expr, j.timezone, j.interval_seconds, j.triggers,
       j.concurrency_policy, j.misfire_policy, j.misfire_window_seconds, j.misfire_max_fires,
       j.active_from, j.active_until, j.exclude, j.shard_count,
       t.next_fire_at::timestamptz AS next_fire_at, t.paused, t.paused_at,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now,
       (j.concurrency_policy <> 'allow' AND EXISTS (
           SELECT 1 FROM ax.execution e
           WHERE e.job_id = j.id AND e.finished_at IS NULL))::boolean AS has_unfinished,
       (j.concurrency_policy = 'queue' AND EXISTS (
           SELECT 1 FROM ax.queued_run q
           WHERE q.job_id = j.id AND q.released_at IS NULL))::boolean AS has_waiting
FROM ax.trigger t
JOIN ax.job j ON j.id = t.job_id
WHERE t.next_fire_at <= coalesce(sqlc.narg('now')::timestamptz, now()) + make_interval(secs => sqlc.arg('ahead_ms')::bigint / 1000.0)
  AND t.next_fire_at IS NOT NULL AND t.set_aside_at IS NULL
  AND (NOT t.paused OR t.next_fire_at <= coalesce(sqlc.narg('now')::timestamptz, now()))
ORDER BY t.next_fire_at
LIMIT @max
FOR UPDATE OF t SKIP LOCKED;

-- TriggerAdvanceMany moves each claimed trigger to its next tick (none
-- when has_next is false) and records its last fire.
-- name: TriggerAdvanceMany :exec
UPDATE ax.trigger t
SET next_fire_at = CASE WHEN u.has_next THEN u.next_fire_at END,
    last_fire_at = CASE WHEN u.fired THEN clock_timestamp() ELSE t.last_fire_at END,
    last_scheduled_for = CASE WHEN u.fired THEN u.last_scheduled_for ELSE t.last_scheduled_for END,
    last_execution_id = CASE WHEN u.fired THEN u.last_execution_id ELSE t.last_execution_id END,
    updated_at = now()
FROM (
    SELECT unnest(@job_ids::uuid[]) AS job_id,
           unnest(@has_next::boolean[]) AS has_next,
           unnest(@next_fire_ats::timestamptz[]) AS next_fire_at,
           unnest(@fired::boolean[]) AS fired,
           unnest(@last_scheduled_fors::timestamptz[]) AS last_scheduled_for,
           unnest(@last_execution_ids::uuid[]) AS last_execution_id
) u
-- The = ANY lets the planner find the rows by job_pkey's index: with
-- the join alone it read all of ax.trigger while its statistics were
-- stale after many new jobs (as ExecutionInsertMany did ax.job).
WHERE t.job_id = u.job_id AND t.job_id = ANY(@job_ids::uuid[]);

-- TriggerNextDue says how long until the earliest tick (a paused job's
-- too: it is recorded as it passes) or pending delayed run, by the database clock (negative when something is
-- already due; null when nothing is scheduled). Both minimums are read
-- from the first entry of a partial index.
-- name: TriggerNextDue :one
WITH earliest AS (
    SELECT least((SELECT min(next_fire_at) FROM ax.trigger
                  WHERE next_fire_at IS NOT NULL AND set_aside_at IS NULL),
                 (SELECT min(run_at) FROM ax.delayed_run WHERE cancelled_at IS NULL AND NOT held)) AS at
)
SELECT coalesce((extract(epoch FROM at - coalesce(sqlc.narg('now')::timestamptz, clock_timestamp())) * 1000000)::bigint, 0)::bigint AS micros,
       (at IS NOT NULL)::boolean AS scheduled
FROM earliest;

-- TriggerRecordFire notes a fire made outside the trigger loop (the
-- trigger API) as the job's last fire.
-- name: TriggerRecordFire :exec
UPDATE ax.trigger
SET last_fire_at = clock_timestamp(), last_scheduled_for = @scheduled_for,
    last_execution_id = @execution_id, updated_at = now()
WHERE job_id = @job_id;

-- TriggerSetAside stops the trigger loop from firing jobs whose fire
-- failed, with why; their next_fire_at stays, so an update of the job
-- (which clears it) resumes from there under the misfire policy.
-- name: TriggerSetAside :exec
UPDATE ax.trigger t
SET set_aside_at = now(), set_aside_reason = u.reason, updated_at = now()
FROM (
    SELECT unnest(@job_ids::uuid[]) AS job_id,
           unnest(@reasons::text[]) AS reason
) u
WHERE t.job_id = u.job_id;

-- TriggerCountOverdue reports unpaused triggers that should have fired (set
-- aside ones are not expected to, and are counted apart): how many are
-- late by more than @late_seconds, and the latest of them; and how many
-- jobs the trigger loop set aside.
-- A metrics query: every replica reads the same shared rows, so all
-- replicas report the same numbers.
-- name: TriggerCountOverdue :one
SELECT count(*) FILTER (WHERE next_fire_at < now() - make_interval(secs => sqlc.arg('late_seconds')::double precision))::bigint AS overdue,
       coalesce(extract(epoch FROM now() - min(next_fire_at)), 0)::double precision AS max_overdue_seconds,
       (SELECT count(*) FROM ax.trigger WHERE set_aside_at IS NOT NULL)::bigint AS set_aside
FROM ax.trigger
WHERE NOT paused AND set_aside_at IS NULL AND next_fire_at <= now();
