-- BackfillInsert stores a backfill. With a @request_key that the job's
-- backfills used already it stores nothing and returns nothing (the
-- caller reads the first: BackfillGetByRequestKey).
-- name: BackfillInsert :one
INSERT INTO ax.backfill (id, job_id, range_from, range_to, max_concurrent, overlap, next_tick, ticks_total, request_key,
                         state, finished_at)
VALUES (@id, @job_id, @range_from, @range_to, @max_concurrent, @overlap, @next_tick, @ticks_total,
        sqlc.narg('request_key'),
        CASE WHEN @ticks_total::integer = 0 THEN 'finished' ELSE 'running' END,
        CASE WHEN @ticks_total::integer = 0 THEN now() END)
ON CONFLICT (job_id, request_key) WHERE request_key IS NOT NULL DO NOTHING
RETURNING id;

-- name: BackfillGetByRequestKey :one
SELECT id FROM ax.backfill WHERE job_id = @job_id AND request_key = @request_key;

-- BackfillGet reads a backfill with its runs counted by state (live or in
-- history).
-- name: BackfillGet :one
SELECT b.*,
       coalesce(c.succeeded, 0)::integer AS runs_succeeded,
       coalesce(c.failed, 0)::integer AS runs_failed,
       coalesce(c.unfinished, 0)::integer AS runs_unfinished
FROM ax.backfill b
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE e.state = 'succeeded') AS succeeded,
           count(*) FILTER (WHERE e.state IN ('failed', 'timed_out', 'cancelled')) AS failed,
           count(*) FILTER (WHERE e.state IN ('pending', 'running')) AS unfinished
    FROM ax.backfill_run r
    JOIN ax.all_executions e ON e.id = r.execution_id
    WHERE r.backfill_id = b.id
) c ON true
WHERE b.id = @id;

-- BackfillListByJob returns a job's backfills, newest first.
-- name: BackfillListByJob :many
SELECT id FROM ax.backfill WHERE job_id = @job_id ORDER BY id DESC LIMIT @max;

-- BackfillClaim locks up to @max running backfills (skipping those other
-- replicas hold) with how many of their runs are unfinished, and for an
-- overlap forbid backfill whether the job has any unfinished run.
-- A backfill that can release nothing now (at max_concurrent, or a
-- forbid one whose job is busy while ticks are left) is not taken: the
-- oldest backfills, held at their limit by runs that take days, took
-- every claim and no later one was ever served. Of the others, those
-- served longest ago (updated_at, which every release sets) come first.
-- name: BackfillClaim :many
SELECT b.id, b.job_id, b.range_to, b.max_concurrent, b.overlap, b.next_tick, c.in_flight, c.job_busy,
       (SELECT j.shard_count FROM ax.job j WHERE j.id = b.job_id)::integer AS shard_count
FROM ax.backfill b
CROSS JOIN LATERAL (
    SELECT (SELECT count(*) FROM ax.execution e
            WHERE e.job_id = b.job_id AND e.finished_at IS NULL AND e.cause = 'backfill'
              AND EXISTS (SELECT 1 FROM ax.backfill_run r WHERE r.execution_id = e.id AND r.backfill_id = b.id))::integer AS in_flight,
           EXISTS (SELECT 1 FROM ax.execution e WHERE e.job_id = b.job_id AND e.finished_at IS NULL)::boolean AS job_busy
) c
WHERE b.state = 'running'
  AND c.in_flight < b.max_concurrent
  AND NOT (b.overlap = 'forbid' AND c.job_busy AND b.next_tick < b.range_to)
ORDER BY b.updated_at, b.id
LIMIT @max
FOR UPDATE OF b SKIP LOCKED;

-- BackfillLockTrigger holds the trigger row of job @job_id, as the trigger
-- loop does while it fires the job, and returns what enumerating its
-- ticks needs. Ticks before next_fire_at are the trigger's past: it will
-- not fire them, so a backfill may.
-- name: BackfillLockTrigger :one
SELECT j.trigger_kind::text AS trigger_kind, coalesce(j.cron_expr, '')::text AS cron_expr, j.timezone,
       t.next_fire_at
FROM ax.trigger t
JOIN ax.job j ON j.id = t.job_id
WHERE t.job_id = @job_id
FOR NO KEY UPDATE OF t;

-- BackfillTicksRun returns which of the ticks in @ticks job @job_id has a
-- run for already (scheduled, caught up or backfilled; live or in history).
-- name: BackfillTicksRun :many
SELECT DISTINCT e.scheduled_for
FROM ax.all_executions e
WHERE e.job_id = @job_id
  AND e.scheduled_for >= @first_tick AND e.scheduled_for <= @last_tick
  AND e.scheduled_for = ANY(@ticks::timestamptz[])
  AND e.cause IN ('schedule', 'catch_up', 'backfill');

-- BackfillRunInsertMany links runs to the backfill that made them.
-- name: BackfillRunInsertMany :exec
INSERT INTO ax.backfill_run (execution_id, backfill_id, tick)
SELECT unnest(@execution_ids::uuid[]), @backfill_id, unnest(@ticks::timestamptz[]);

-- BackfillAdvance moves a backfill's cursor and counts, and ends it
-- (finished) when @done.
-- name: BackfillAdvance :exec
UPDATE ax.backfill
SET next_tick = @next_tick,
    ticks_created = ticks_created + @created::integer,
    ticks_existing = ticks_existing + @existing::integer,
    state = CASE WHEN @done::boolean THEN 'finished' ELSE state END,
    finished_at = CASE WHEN @done::boolean THEN now() ELSE finished_at END,
    updated_at = now()
WHERE id = @id;

-- BackfillCancel stops a running backfill; it returns the ids of its
-- unfinished runs, for the caller to cancel. A backfill that ended already
-- is left as it is (no rows).
-- name: BackfillCancel :many
WITH b AS (
    UPDATE ax.backfill bf
    SET state = 'cancelled', finished_at = now(), updated_at = now()
    WHERE bf.id = @id AND bf.state = 'running'
    RETURNING bf.id, bf.job_id
)
SELECT e.id
FROM b
JOIN ax.backfill_run r ON r.backfill_id = b.id
JOIN ax.execution e ON e.id = r.execution_id
WHERE e.finished_at IS NULL;

-- BackfillOfExecution returns the backfill that made run @execution_id.
-- name: BackfillOfExecution :one
SELECT backfill_id FROM ax.backfill_run WHERE execution_id = @execution_id;

-- BackfillRunPrune deletes up to @max links of a backfill to runs fired
-- before the history horizon (ax.history_horizon, migration 00091) that
-- are no longer live nor in history: one a backfilled tick, for as long
-- as ax ran. BackfillGet joins its links with the runs, so it counted
-- none of these, but read each one. Oldest first, by key.
-- name: BackfillRunPrune :execrows
DELETE FROM ax.backfill_run b
WHERE b.execution_id = ANY(ARRAY(
    SELECT r.execution_id
    FROM ax.backfill_run r
    WHERE r.execution_id < ax.uuid_v7_floor(ax.history_horizon(now()))
      AND NOT EXISTS (SELECT 1 FROM ax.execution e WHERE e.id = r.execution_id)
      AND NOT EXISTS (SELECT 1 FROM ax.execution_history e WHERE e.id = r.execution_id)
    ORDER BY r.execution_id
    LIMIT sqlc.arg('max')::integer));
