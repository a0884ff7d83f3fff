-- SkippedFireInsertMany records ticks that did not fire (tick_count < 1
-- means not counted).
-- name: SkippedFireInsertMany :exec
INSERT INTO ax.skipped_fire (job_id, reason, first_tick, last_tick, tick_count, detail)
SELECT s.job_id, s.reason::ax.skip_reason, s.first_tick, s.last_tick, nullif(s.tick_count, 0), s.detail
FROM (
    SELECT unnest(@job_ids::uuid[]) AS job_id,
           unnest(@reasons::text[]) AS reason,
           unnest(@first_ticks::timestamptz[]) AS first_tick,
           unnest(@last_ticks::timestamptz[]) AS last_tick,
           unnest(@tick_counts::integer[]) AS tick_count,
           unnest(@details::text[]) AS detail
) s;

-- name: SkippedFireListByJob :many
SELECT * FROM ax.skipped_fire
WHERE job_id = @job_id
ORDER BY first_tick DESC
LIMIT @max;

-- SkippedFireCovering returns the newest skip record of job @job_id whose
-- ticks span @at (its first to its last tick): why a tick at @at did not
-- fire, when it was recorded.
-- name: SkippedFireCovering :one
SELECT * FROM ax.skipped_fire
WHERE job_id = @job_id AND first_tick <= @at AND last_tick >= @at
ORDER BY recorded_at DESC
LIMIT 1;

-- SkippedFireExtendPaused adds ticks to the job's record of paused ticks
-- made in this pause (since @paused_at) within the last hour, when there
-- is one that counts its ticks; nothing returned otherwise (insert a new
-- record). An hour bounds how far a record's ticks run past the partition
-- its recorded_at put it in.
-- name: SkippedFireExtendPaused :one
UPDATE ax.skipped_fire s
SET last_tick = sqlc.arg('last_tick')::timestamptz, tick_count = s.tick_count + sqlc.arg('tick_count')::integer
WHERE s.id = (
    SELECT p.id FROM ax.skipped_fire p
    WHERE p.job_id = sqlc.arg('job_id')::uuid AND p.reason = 'paused' AND p.recorded_at >= sqlc.arg('paused_at')::timestamptz
      AND p.recorded_at > now() - interval '1 hour' AND p.tick_count IS NOT NULL
      AND p.last_tick < sqlc.arg('first_tick')::timestamptz
    ORDER BY p.last_tick DESC
    LIMIT 1)
  AND s.recorded_at > now() - interval '1 hour'
RETURNING s.id;
